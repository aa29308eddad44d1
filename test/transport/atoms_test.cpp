// Two atoms with the same text are the same type in CAF 0.17: a message
// meant for one handler would reach another. Every atom of the runtime
// must have a text of its own.

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "actorflow/transport/type_ids.hpp"

using namespace actorflow;

TEST_CASE("atoms: every runtime atom has its own text", "[atoms]") {
  std::vector<caf::atom_value> atoms{
    create_session_atom::value, close_session_atom::value,
    run_step_atom::value,       register_graph_atom::value,
    run_graph_atom::value,      abort_step_atom::value,
    recv_tensor_atom::value,    get_variable_atom::value,
    read_atom::value,           assign_atom::value,
    assign_add_atom::value,     assign_sub_atom::value,
    is_initialized_atom::value, get_stats_atom::value,
    reset_atom::value,          cleanup_atom::value,
    check_deadlines_atom::value, caf::connect_atom::value,
    get_worker_atom::value,     step_reply_atom::value,
    get_monitor_atom::value,    commit_step_atom::value,
    cancel_step_atom::value,    replicate_atom::value,
    replica_sync_atom::value,   promote_atom::value,
    set_backup_atom::value,     depose_atom::value,
    attach_replica_atom::value, get_replica_atom::value,
    serving_atom::value,        replica_lost_atom::value,
    replica_tick_atom::value,   find_peer_atom::value,
    retry_step_atom::value,     step_alive_atom::value};
  std::set<std::string> texts;
  for (auto a : atoms)
    texts.insert(caf::to_string(a));
  CHECK(texts.size() == atoms.size());
  // Nor may one reuse a text of CAF's own atoms (caf/type_id.hpp).
  for (auto caf_text : {"add", "close", "get", "put", "reset", "resolve",
                        "update", "delete", "ok", "join", "leave", "open",
                        "spawn", "stream", "timeout", "tick", "wait_for"})
    CHECK(texts.count(caf_text) == 0);
}
