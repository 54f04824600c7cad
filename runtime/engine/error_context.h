// Adds context to an error while keeping its hora::Error subclass, so a PeerFailure raised by the
// transport reaches every affected op as a PeerFailure whose message also names the op.
#pragma once

#include <exception>
#include <string>

namespace hora::detail::engine {

// Returns an exception of the same hora::Error subclass (rank, host and peer kept) whose message
// is `context` + ": " + the original message. Exceptions that are not hora::Error become a
// hora::Error with the same composition.
std::exception_ptr with_context(std::exception_ptr error, const std::string& context);

}  // namespace hora::detail::engine
