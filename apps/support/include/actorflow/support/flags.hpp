#pragma once

// Command lines with CLI11 (Debian's libcli11-dev), as every actorflow
// program takes them: "--name value", "--name=value", "--switch". Each flag
// is declared once, with its validator and its help text; CLI11 writes
// --help from the declarations. The validators here give actorflow's
// messages, which CLI11 prefixes with the flag ("--batch_size: must be at
// least 1, got 0"), and no description of their own: the help shows an
// option's type name (->type_name("N")) and its text.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actorflow/support/guarded_main.hpp"

namespace actorflow::support {

/// A decimal integer in [min, max]: "expected an integer, got 'x'", "must
/// be at least 1, got 0", "must be at most 64, got 65".
CLI::Validator integer_in(long long min, long long max);

/// A finite number above 0: "expected a number, got 'fast'", "must be
/// positive, got 0".
CLI::Validator positive_number();

/// A number below `bound` (after positive_number, say): "must be below 1,
/// got 1.5".
CLI::Validator number_below(double bound);

/// A number not above `bound`: "must be at most 1, got 1.5".
CLI::Validator number_at_most(double bound);

/// One of `choices`: "expected softmax, mlp or cnn, got 'resnet'".
CLI::Validator one_of(std::vector<std::string> choices);

/// A TCP port, 0 to 65535: "expected a port number, got '70000'".
CLI::Validator port_number();

/// A process id (above 1): "expected a process id, got 'x'".
CLI::Validator process_id();

/// A task index, 0 to 1000000: "expected a task index, got 'x'".
CLI::Validator task_index();

/// "host:port" or "[v6]:port", as actorflow::host_port parses it:
/// "expected HOST:PORT: <why>".
CLI::Validator host_port_address();

/// A comma-separated list whose entries `item` accepts ("empty entry in
/// 'a,,b'", or item's message naming the entry), and exactly `count` of
/// them if `count` is not 0 ("expected 2 comma-separated entries, got
/// '16'").
CLI::Validator list_of(CLI::Validator item, size_t count = 0);

/// Not "": "empty".
CLI::Validator non_empty();

/// The bytes of a size: a decimal number with an optional suffix K, M, G
/// or T (powers of 1024, either case, optionally followed by "iB" or "B";
/// "B" alone too): "3G", "512M", "64MiB", "1048576". std::nullopt for
/// anything else and for sizes past 2^64 - 1.
std::optional<uint64_t> parse_byte_size(const std::string& text);

/// A size parse_byte_size accepts, rewritten to its number of bytes (add
/// it with ->transform, not ->check): "expected a size in bytes such as
/// 3G, 512M or 1048576, got '3X'".
CLI::Validator byte_size();

/// A file this process may execute: "PATH: not an executable file".
CLI::Validator executable_file();

/// The help formatter of actorflow's programs: CLI11's, with each flag's
/// text wrapped to fit 79 columns.
std::shared_ptr<CLI::Formatter> help_formatter();

/// "a,b,c" -> {a, b, c} (the lists list_of accepted).
std::vector<std::string> split_list(const std::string& list);

/// The usage_error for a CLI11 parse error of `app`, naming the flag: an
/// unknown flag or argument, a flag given twice, a missing value, a value
/// a validator refused.
usage_error usage_error_of(const CLI::ParseError& e, const CLI::App& app);

/// Parses `args` (the program's name first) with `app`, after refusing a
/// value given to a switch ("--quick=1": "--quick takes no value"; CLI11
/// would read "--quick=0" as off). Returns false if --help was given: the
/// help CLI11 writes is then on stdout. Errors: usage_error_of. Every
/// option of `app` should refuse to be given twice
/// (app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::
/// Throw) before adding them).
bool parse_flags(CLI::App& app, std::vector<std::string> args);

} // namespace actorflow::support
