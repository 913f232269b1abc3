/* placeholder: written by the memcache work */
