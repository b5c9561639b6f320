/* Uses the installed libhcclient the way a C program outside the project does. Nothing here
 * needs a running daemon: the version and the error strings are answered by the library. */
#include <hetero_comm/hc.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  int version = 0;
  if (hc_get_version(&version) != HC_OK) {
    fprintf(stderr, "hc_get_version failed\n");
    return 1;
  }
  /* The header and the library it was installed with must agree. */
  if (version != HC_VERSION_CODE) {
    fprintf(stderr, "library version %d, header version %d\n", version, HC_VERSION_CODE);
    return 1;
  }
  if (hc_get_version(NULL) != HC_INVALID_ARGUMENT) {
    fprintf(stderr, "hc_get_version(NULL) did not report an invalid argument\n");
    return 1;
  }
  const char* message = hc_get_error_string(HC_UNAVAILABLE);
  if (message == NULL || strlen(message) == 0) {
    fprintf(stderr, "hc_get_error_string returned nothing\n");
    return 1;
  }
  printf("libhcclient version %d; HC_UNAVAILABLE: %s\n", version, message);
  return 0;
}
