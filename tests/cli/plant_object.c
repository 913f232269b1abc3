/* Test object for tests/cli/test_cache_run.sh: the shared object an
 * attacker plants in the disk cache in place of a compiled kernel. Its
 * constructor, which runs as soon as the object is loaded, writes the file
 * $TSR_PLANT_MARKER: the test checks that it never appears. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void planted(void) {
  const char *marker = getenv("TSR_PLANT_MARKER");
  if (!marker) return;
  int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  (void)!write(fd, "the planted object ran\n", 23);
  close(fd);
}
