#pragma once

// Spawning an actor with a monitoring record (actorflow/actors/
// monitoring.hpp), so that it shows in actorflow-console and /metrics with
// the engine's own: the engine spawns its actors this way, and an
// embedding CAF application may spawn its own (kind `other`, its name,
// the task it serves or "" for the process). This header pulls in CAF:
// include it only from .cpp files.
//
// CAF 0.17 on Debian is built without its actor profiler, so the hook is
// CAF's own virtual `consume`, through which every message an event-based
// actor handles passes (requests, responses, system messages): the
// subclass times it and reads the mailbox's depth on the actor's own
// thread, where that is safe.

#include <caf/all.hpp>

#include "actorflow/actors/monitoring.hpp"

namespace actorflow {

template <class Impl>
class instrumented : public Impl {
public:
  template <class F, class... Ts>
  instrumented(caf::actor_config& cfg, monitoring::identity who, F fun,
               Ts&&... xs)
    : Impl(with_init(cfg, std::move(fun), std::forward<Ts>(xs)...)),
      record_(monitoring::registry::instance().add(this->id(),
                                                   std::move(who))) {
    // nop
  }

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    auto start = monitoring::ticks();
    auto result = Impl::consume(x);
    auto end = monitoring::ticks();
    // A thread that moved to another core may read a slightly earlier
    // counter there. The queued messages: mailbox().size() would also move
    // newly arrived ones into the queues in the middle of CAF's round
    // (those count at the next round).
    record_->handled(
      end > start ? end - start : 0,
      static_cast<uint32_t>(this->mailbox().queue().total_task_size()), end);
    return result;
  }

  bool cleanup(caf::error&& reason, caf::execution_unit* host) override {
    monitoring::registry::instance().remove(
      this->id(), reason ? caf::to_string(reason) : "normal");
    return Impl::cleanup(std::move(reason), host);
  }

  /// The actor's record (its kind-specific gauges).
  monitoring::actor_record& record() {
    return *record_;
  }

private:
  template <class F, class... Ts>
  static caf::actor_config& with_init(caf::actor_config& cfg, F fun,
                                      Ts&&... xs) {
    caf::detail::init_fun_factory<Impl, F> fac;
    cfg.init_fun = fac(std::move(fun), std::forward<Ts>(xs)...);
    return cfg;
  }

  std::shared_ptr<monitoring::actor_record> record_;
};

/// Spawns `fun(self, xs...)` as sys.spawn<Os>(fun, xs...) would, with a
/// monitoring record for `who` when monitoring is enabled (the record goes
/// to the registry's list of ended actors when the actor ends). Does not
/// block beyond the registry's short lock.
template <caf::spawn_options Os = caf::no_spawn_options, class F,
          class... Ts>
caf::infer_handle_from_fun_t<F>
spawn_instrumented(caf::actor_system& sys, monitoring::identity who, F fun,
                   Ts&&... xs) {
  if (!monitoring::enabled())
    return sys.spawn<Os>(std::move(fun), std::forward<Ts>(xs)...);
  using impl = caf::infer_impl_from_fun_t<F>;
  return sys.spawn<instrumented<impl>, Os>(std::move(who), std::move(fun),
                                           std::forward<Ts>(xs)...);
}

/// The record of the actor behind `self` when it was spawned instrumented,
/// else nullptr (for the gauges an actor sets).
template <class Self>
monitoring::actor_record* record_of(Self* self) {
  using impl = std::remove_pointer_t<decltype(self)>;
  if (auto* x = dynamic_cast<instrumented<impl>*>(self))
    return &x->record();
  return nullptr;
}

} // namespace actorflow
