/* placeholder: written by the disk cache work */
