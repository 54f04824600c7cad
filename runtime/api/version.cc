// The public API of <hora/version.h>: libhora's version, fixed when libhora is built.
#include <hora/version.h>

namespace hora {

const char* version() noexcept { return HORA_VERSION_STRING; }

}  // namespace hora
