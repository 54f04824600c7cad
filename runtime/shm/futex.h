// Linux futexes on a 32-bit word that may live in memory shared between processes (so the
// non-private variants: a waiter in one process is woken by a store in another).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hora::detail::shm {

// Sleeps while *word == expected, at most `timeout`, or until futex_wake(). Returns at once when
// *word already differs. Spurious returns are possible: callers re-check their condition.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                std::chrono::nanoseconds timeout);

// Wakes every waiter on `word`, in any process.
void futex_wake_all(std::atomic<std::uint32_t>* word);

}  // namespace hora::detail::shm
