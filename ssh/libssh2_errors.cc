#include "ssh/libssh2_errors.h"

#include <libssh2.h>

namespace hora::ssh {

bool is_session_fatal(int rc) {
  switch (rc) {
    case LIBSSH2_ERROR_CHANNEL_OUTOFORDER:
    case LIBSSH2_ERROR_CHANNEL_FAILURE:
    case LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED:
    case LIBSSH2_ERROR_CHANNEL_UNKNOWN:
    case LIBSSH2_ERROR_CHANNEL_WINDOW_EXCEEDED:
    case LIBSSH2_ERROR_CHANNEL_PACKET_EXCEEDED:
    case LIBSSH2_ERROR_CHANNEL_CLOSED:
    case LIBSSH2_ERROR_CHANNEL_EOF_SENT:
    case LIBSSH2_ERROR_CHANNEL_WINDOW_FULL:
    case LIBSSH2_ERROR_REQUEST_DENIED:
    case LIBSSH2_ERROR_EAGAIN: return false;
    default: return rc < 0;
  }
}

}  // namespace hora::ssh
