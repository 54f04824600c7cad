#include "runtime/process/crash_report.h"

#include <cxxabi.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <typeinfo>

#include "hora/error.h"
#include "runtime/core/env.h"

namespace hora::detail {
namespace {

constexpr std::array<int, 5> kSignals = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

// What the handler prints is prepared outside it: no allocation or formatting inside.
char g_who[256] = "";
struct sigaction g_previous[kSignals.size()];
std::atomic<bool> g_reporting{false};
// Set by the terminate handler before it aborts for an uncaught hora error: that error's message
// already says what happened, so the SIGABRT that follows prints no native stack.
std::atomic<bool> g_explained_abort{false};
std::terminate_handler g_previous_terminate = nullptr;

// Bytes of each alternate signal stack: the report itself needs little, backtrace() a few KiB.
constexpr std::size_t kAltStackBytes = 64 * 1024;

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGFPE: return "SIGFPE (arithmetic fault)";
    case SIGABRT: return "SIGABRT (abort)";
    default: return "a fatal signal";
  }
}

void put(const char* s) {
  std::size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

void put_number(unsigned long long v, int base) {
  char buf[32];
  int i = sizeof buf;
  buf[--i] = '\0';
  do {
    const int d = static_cast<int>(v % static_cast<unsigned>(base));
    buf[--i] = static_cast<char>(d < 10 ? '0' + d : 'a' + d - 10);
    v /= static_cast<unsigned>(base);
  } while (v != 0 && i > 0);
  put(buf + i);
}

int slot_of(int sig) {
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    if (kSignals[i] == sig) return static_cast<int>(i);
  }
  return -1;
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // One report per process: a second thread faulting meanwhile goes straight on.
  const bool explained = sig == SIGABRT && g_explained_abort.load();
  if (!explained && !g_reporting.exchange(true)) {
    char thread_name[17] = "";
    prctl(PR_GET_NAME, thread_name, 0, 0, 0);
    put("hora: ");
    put(g_who);
    put(": fatal signal ");
    put(signal_name(sig));
    // si_addr is the faulting address only for a fault the kernel raised (si_code > 0); for a
    // signal that was sent (kill, raise, faulthandler's re-raise) the same bytes hold the
    // sender's pid.
    if (sig != SIGABRT && info != nullptr && info->si_code > 0) {
      put(" at address 0x");
      put_number(reinterpret_cast<unsigned long long>(info->si_addr), 16);
    } else if (info != nullptr && info->si_code <= 0 && info->si_pid != ::getpid()) {
      put(" sent by pid ");
      put_number(static_cast<unsigned long long>(info->si_pid), 10);
    }
    put(" in thread ");
    put_number(static_cast<unsigned long long>(::syscall(SYS_gettid)), 10);
    put(" '");
    put(thread_name);
    put("'; its native stack (resolve lib(+0xOFFSET) with addr2line -f -C -e lib 0xOFFSET):\n");
    void* frames[64];
    const int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    put("hora: end of the crash report\n");
  }
  // Then what would have happened without hora: the program's handler, or the default action.
  const int slot = slot_of(sig);
  const struct sigaction& previous = g_previous[slot < 0 ? 0 : slot];
  if (slot >= 0 && (previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
  } else if (slot >= 0 && previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
             previous.sa_handler != nullptr) {
    previous.sa_handler(sig);
  } else {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    // A fault re-executes the faulting instruction on return and dies of it; a signal that was
    // sent (raise, abort, kill) is sent again.
    if (info == nullptr || info->si_code <= 0) raise(sig);
  }
  errno = saved_errno;
}

// std::terminate on an uncaught hora::Error (a PeerFailure in a rank whose peer died, an
// AbortedError after the launcher ended the job): one line with the error's own message, which
// names the failed rank and the op, instead of the C++ runtime's "terminate called after
// throwing" and a native stack, which would make an innocent survivor look like the crash. Any
// other exception, or none, goes to the handler that was there before.
[[noreturn]] void on_terminate() {
  if (const std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const hora::Error& e) {
      const std::type_info* type = abi::__cxa_current_exception_type();
      int status = 0;
      char* name = type ? abi::__cxa_demangle(type->name(), nullptr, nullptr, &status) : nullptr;
      put("hora: ");
      put(g_who);
      put(": ended by an uncaught ");
      put(name != nullptr && status == 0 ? name : "hora::Error");
      put(": ");
      put(e.what());
      put("\n");
      std::free(name);
      g_explained_abort = true;
      std::abort();
    } catch (...) {
    }
  }
  if (g_previous_terminate != nullptr) g_previous_terminate();
  std::abort();
}

}  // namespace

void install_alt_signal_stack() {
  // One per thread, never freed while the thread lives: a stack overflow (the guard page hit)
  // cannot run the SIGSEGV handler on the stack that overflowed. The thread_local holder frees
  // it at thread exit, after disabling it.
  struct AltStack {
    void* memory = nullptr;
    ~AltStack() {
      if (memory == nullptr) return;
      stack_t off{};
      off.ss_flags = SS_DISABLE;
      sigaltstack(&off, nullptr);
      std::free(memory);
    }
  };
  thread_local AltStack alt;
  if (alt.memory != nullptr) return;
  stack_t current{};
  // A stack the program (or Python, or a sanitizer) installed stays.
  if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0) return;
  void* memory = std::malloc(kAltStackBytes);
  if (memory == nullptr) return;
  stack_t stack{};
  stack.ss_sp = memory;
  stack.ss_size = kAltStackBytes;
  if (sigaltstack(&stack, nullptr) != 0) {
    std::free(memory);
    return;
  }
  alt.memory = memory;
}

void install_crash_report(const std::string& who) {
  const char* setting = std::getenv(env::kCrashReport);
  if (setting != nullptr && std::strcmp(setting, "0") == 0) return;
  // The text first, so that a signal arriving during installation finds it complete.
  std::strncpy(g_who, who.c_str(), sizeof g_who - 1);
  static std::once_flag once;
  std::call_once(once, [] {
    // backtrace() loads libgcc_s on its first call, which must not happen in the handler.
    void* warm[1];
    backtrace(warm, 1);
    for (std::size_t i = 0; i < kSignals.size(); ++i) {
      struct sigaction action {};
      action.sa_sigaction = on_fatal_signal;
      action.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&action.sa_mask);
      sigaction(kSignals[i], &action, &g_previous[i]);
    }
    g_previous_terminate = std::set_terminate(on_terminate);
  });
  install_alt_signal_stack();  // the calling thread's (init() runs on the program's thread)
}

}  // namespace hora::detail
