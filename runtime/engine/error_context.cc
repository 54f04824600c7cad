#include "runtime/engine/error_context.h"

#include <hora/error.h>

namespace hora::detail::engine {

std::exception_ptr with_context(std::exception_ptr error, const std::string& context) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerFailure& e) {
    return std::make_exception_ptr(
        PeerFailure(context + ": " + e.what(), e.rank(), e.host(), e.peer()));
  } catch (const UsageError& e) {
    return std::make_exception_ptr(UsageError(context + ": " + e.what(), e.rank(), e.host()));
  } catch (const ConnectionError& e) {
    return std::make_exception_ptr(ConnectionError(context + ": " + e.what(), e.rank(), e.host()));
  } catch (const TimeoutError& e) {
    return std::make_exception_ptr(TimeoutError(context + ": " + e.what(), e.rank(), e.host()));
  } catch (const MismatchError& e) {
    return std::make_exception_ptr(MismatchError(context + ": " + e.what(), e.rank(), e.host()));
  } catch (const AbortedError& e) {
    return std::make_exception_ptr(AbortedError(context + ": " + e.what(), e.rank(), e.host()));
  } catch (const Error& e) {
    return std::make_exception_ptr(Error(context + ": " + e.what(), e.rank(), e.host()));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(Error(context + ": " + e.what()));
  } catch (...) {
    return std::make_exception_ptr(Error(context + ": unknown error"));
  }
}

}  // namespace hora::detail::engine
