#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "actorflow/graph/status.hpp"

namespace actorflow {

/// TensorFlow's `tf.train.Coordinator`: lets a set of threads stop
/// together and report the first error to the thread that joins them.
///
/// ~~~
/// coordinator coord;
/// start_queue_runners(sess, coord);
/// try {
///   while (!coord.should_stop())
///     sess.run(train_op);
/// } catch (...) {
///   coord.request_stop(std::current_exception());
/// }
/// coord.request_stop();
/// coord.join();   // rethrows the first error a thread reported
/// ~~~
///
/// Every member function is thread-safe. Waits use a condition variable
/// (no polling).
///
/// Ownership: the coordinator owns the std::threads registered with it.
/// `join()` joins the ones that ended; threads still running when join
/// gives up (see there) stay owned by the coordinator. The destructor
/// requests a stop and then joins every thread it still owns, blocking
/// until they have all returned: threads must not outlive what they use
/// (a session, a queue runner) and must stop once a stop is requested.
class coordinator {
public:
  /// `clean_stop_codes` are the op_error codes that request a stop
  /// without being an error (TF's `clean_stop_exception_types`, by default
  /// OutOfRange: an input queue that is exhausted ends training cleanly).
  /// An explicitly empty list makes every exception an error.
  explicit coordinator(std::vector<error_code> clean_stop_codes
                       = {error_code::out_of_range});
  /// Requests a stop, then joins every thread still owned (blocks).
  ~coordinator();

  coordinator(const coordinator&) = delete;
  coordinator& operator=(const coordinator&) = delete;

  // -- stopping ---------------------------------------------------------------

  /// Requests that the threads stop: `should_stop()` is true from now on
  /// and waiters wake up. Idempotent. Never blocks (beyond the lock).
  void request_stop();

  /// As above, reporting `ex` (TF's `request_stop(ex)`): if this is the
  /// first stop request since construction or `clear_stop()`, `ex` is
  /// recorded and `join()` rethrows it; later exceptions are ignored. A
  /// null `ex`, or an op_error whose code is a clean-stop code, only
  /// requests the stop. After `join()` (and before `clear_stop()`) nobody
  /// would see `ex`, so it is rethrown here instead, as TF does.
  void request_stop(std::exception_ptr ex);

  /// True once a stop was requested (and not cleared).
  bool should_stop() const;

  /// Blocks until a stop is requested; returns true.
  bool wait_for_stop() const;
  /// Blocks until a stop is requested or `timeout` passed; true if a stop
  /// was requested (TF's `wait_for_stop(timeout)`).
  bool wait_for_stop(std::chrono::milliseconds timeout) const;

  /// TF's `clear_stop`: forgets the stop request, the recorded exception
  /// and that `join()` ran, so the coordinator can be used again.
  void clear_stop();

  /// Rethrows the exception recorded by `request_stop(ex)`, if any (TF's
  /// `raise_requested_exception`).
  void raise_requested_exception() const;

  /// The recorded exception, or null.
  std::exception_ptr requested_exception() const;

  /// TF's `with coord.stop_on_exception():`: runs `f`; an exception it
  /// throws is passed to `request_stop` instead of propagating (which
  /// rethrows it only after `join()`, see there).
  template <class F>
  void run_guarded(F&& f) {
    try {
      std::forward<F>(f)();
    } catch (...) {
      request_stop(std::current_exception());
    }
  }

  // -- threads ----------------------------------------------------------------

  /// Starts `body` on a new thread named `name` ("Thread-<n>" if empty)
  /// and registers it (TF: `threading.Thread(...)`, `register_thread`,
  /// `start()`). An exception escaping `body` is reported through
  /// `request_stop` (as in `run_guarded`; if even that throws, it is
  /// dropped). The thread counts as finished as soon as `body` returns.
  /// Throws std::system_error if no thread can be started.
  void start_thread(std::string name, std::function<void()> body);

  /// Registers `t`, a thread the caller started, under `name`
  /// ("Thread-<n>" if empty) (TF's `register_thread`). A std::thread cannot
  /// tell that its function returned, so that function must end by
  /// calling `thread_finished()` on this coordinator; until then `join()`
  /// counts the thread as running. A non-joinable `t` counts as finished.
  /// Prefer `start_thread`.
  void register_thread(std::thread t, std::string name = {});

  /// Marks the calling thread, registered with `register_thread` (before
  /// or after this call), as finished and wakes `join()`. Call it only
  /// from such a thread, as its last act.
  void thread_finished();

  /// Waits for the registered threads (TF's `join`):
  ///
  /// 1. Blocks until every thread registered when join was called has
  ///    finished, or a stop is requested.
  /// 2. If threads are still running, waits up to `stop_grace_period`
  ///    more for them (counted from the moment step 1 saw the stop
  ///    request, as TF; a negative period does not wait).
  /// 3. Joins the finished threads and forgets all registrations;
  ///    threads still running stay owned by the coordinator (its
  ///    destructor joins them).
  /// 4. Rethrows the exception recorded by `request_stop(ex)`, if any;
  ///    otherwise, if threads were still running and `ignore_live_threads`
  ///    is false, throws op_error (Internal; TF raises RuntimeError)
  ///    "Coordinator stopped with threads still running: <names>" (names
  ///    separated by spaces).
  ///
  /// Blocks indefinitely in step 1 if no stop is requested and a thread
  /// never ends.
  void join(std::chrono::milliseconds stop_grace_period
            = std::chrono::seconds{120},
            bool ignore_live_threads = false);

  /// True after `join()` (until `clear_stop()`).
  bool joined() const;

private:
  struct thread_slot {
    std::string name;
    std::thread thread;
    std::thread::id id;
    bool done = false;
  };
  using slot_ptr = std::shared_ptr<thread_slot>;

  bool is_clean_stop(const std::exception_ptr& ex) const;
  std::string next_name(std::string name);
  void mark_done(thread_slot& slot);

  const std::vector<error_code> clean_stop_codes_;
  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
  bool stop_requested_ = false;
  bool joined_ = false;
  std::exception_ptr exc_;
  /// Threads a coming or running join() looks at.
  std::vector<slot_ptr> registered_;
  /// Threads a join() gave up on; joined by the destructor.
  std::vector<slot_ptr> leftovers_;
  /// Threads that called thread_finished() before being registered.
  std::vector<std::thread::id> finished_early_;
  std::size_t thread_counter_ = 0;
};

} // namespace actorflow
