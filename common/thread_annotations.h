// Which lock guards which state, written so that clang checks it (-Wthread-safety, on in every
// clang build: meson.build). A member declared `HORA_GUARDED_BY(mu_)` may only be read or
// written with mu_ held; a function declared `HORA_REQUIRES(mu_)` may only be called with it held
// and `HORA_EXCLUDES(mu_)` only without. Under gcc the macros are empty and hora::Mutex is a
// plain std::mutex.
//
// The analysis sees locks taken through hora::Mutex, hora::RecursiveMutex and hora::Lock only
// (std::mutex carries no annotations in libstdc++), and it checks every function on its own: a
// lambda does not inherit what its caller holds. So condition-variable waits are written as
// `while (!ready_) cv_.wait(mu_);` instead of with a predicate lambda, and a callback that runs
// under a lock states it with a function declared HORA_ASSERT_HELD.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define HORA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HORA_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are locks (the name appears in the warnings).
#define HORA_CAPABILITY(name) HORA_THREAD_ANNOTATION(capability(name))
// On a class: an RAII holder of a lock (taken by the constructor, given back by the destructor).
#define HORA_SCOPED_CAPABILITY HORA_THREAD_ANNOTATION(scoped_lockable)
// On a member: read or written only with the lock held.
#define HORA_GUARDED_BY(lock) HORA_THREAD_ANNOTATION(guarded_by(lock))
// On a pointer member: what it points to is read or written only with the lock held.
#define HORA_PT_GUARDED_BY(lock) HORA_THREAD_ANNOTATION(pt_guarded_by(lock))
// On a function: its caller holds these locks (and still holds them when it returns).
#define HORA_REQUIRES(...) HORA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// On a function: its caller does not hold these locks (the function takes them).
#define HORA_EXCLUDES(...) HORA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: it takes / gives back these locks (no argument: the object it is called on).
#define HORA_ACQUIRE(...) HORA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define HORA_RELEASE(...) HORA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// On a function returning bool: the lock is held when it returned `result`.
#define HORA_TRY_ACQUIRE(...) HORA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: once it returned, the analysis takes the lock as held by this thread (for code
// the analysis cannot follow, e.g. a callback that always runs under a lock).
#define HORA_ASSERT_HELD(...) HORA_THREAD_ANNOTATION(assert_capability(__VA_ARGS__))
// On a function: it returns (a reference to) this lock.
#define HORA_RETURN_CAPABILITY(lock) HORA_THREAD_ANNOTATION(lock_returned(lock))
// On a function: not checked. Each use says why.
#define HORA_NO_THREAD_SAFETY_ANALYSIS HORA_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace hora {

// A lock the analysis knows; M is std::mutex or std::recursive_mutex. It satisfies Lockable, so
// std::lock_guard and std::scoped_lock work with it too (unchecked: prefer hora::Lock).
template <typename M>
class HORA_CAPABILITY("mutex") BasicMutex {
 public:
  BasicMutex() = default;
  BasicMutex(const BasicMutex&) = delete;
  BasicMutex& operator=(const BasicMutex&) = delete;

  void lock() HORA_ACQUIRE() { m_.lock(); }
  void unlock() HORA_RELEASE() { m_.unlock(); }
  bool try_lock() HORA_TRY_ACQUIRE(true) { return m_.try_lock(); }

  // The std mutex itself, for hora::CondVar.
  M& native() HORA_RETURN_CAPABILITY(this) { return m_; }

 private:
  M m_;
};

using Mutex = BasicMutex<std::mutex>;
// Taken again by the thread that holds it: the analysis does not model that (it warns where it
// sees the same lock taken twice in one function); the runtime allows it.
using RecursiveMutex = BasicMutex<std::recursive_mutex>;

// Holds a lock for its scope: `hora::Lock lock(mu_);`.
template <typename M>
class HORA_SCOPED_CAPABILITY Lock {
 public:
  explicit Lock(M& m) HORA_ACQUIRE(m) : m_(m) { m_.lock(); }
  ~Lock() HORA_RELEASE() { m_.unlock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  M& m_;
};

// A capability no lock stands behind: the right to touch state confined to one thread, such as
// an io_context's (the rendezvous server). Its functions are declared HORA_REQUIRES(role); an
// entry point the analysis cannot follow into (an Asio completion handler, a posted lambda, a
// public method whose contract says "io thread only") begins with role.assert_held(), which
// tells the analysis and costs nothing at run time.
class HORA_CAPABILITY("role") ThreadRole {
 public:
  void assert_held() const HORA_ASSERT_HELD(this) {}
};

// std::condition_variable over a hora::Mutex its caller holds (and holds again on return). No
// predicate overloads: loop at the call site, where the analysis sees the lock held.
class CondVar {
 public:
  void wait(Mutex& mu) HORA_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False once the deadline has passed.
  template <typename Clock, typename Duration>
  bool wait_until(Mutex& mu, std::chrono::time_point<Clock, Duration> deadline) HORA_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace hora
