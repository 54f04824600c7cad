// Which libssh2 return codes end the whole connection (shared by the session, its channels and
// authentication).
#pragma once

namespace hora::ssh {

// True for errors that end the whole connection, as opposed to one channel or one attempt.
bool is_session_fatal(int rc);

}  // namespace hora::ssh
