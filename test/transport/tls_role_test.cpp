// A certificate's role (tls_context.hpp, role_in): the URI name
// urn:actorflow:role:ROLE that actorflow-make-certs writes; none for a
// certificate made before roles; an unknown role or two different ones
// refuse the peer, naming what it said, escaped.

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <openssl/x509v3.h>

#include "tls_context.hpp"

using namespace actorflow;
using namespace actorflow::tls_detail;

namespace {

using cert_ptr = std::unique_ptr<X509, decltype(&X509_free)>;

// A certificate with these subject alternative names ({type, text}).
cert_ptr with_names(const std::vector<std::pair<int, std::string>>& list) {
  cert_ptr cert{X509_new(), &X509_free};
  auto* names = sk_GENERAL_NAME_new_null();
  for (const auto& [type, text] : list) {
    auto* name = GENERAL_NAME_new();
    auto* value = ASN1_IA5STRING_new();
    ASN1_STRING_set(value, text.data(), static_cast<int>(text.size()));
    GENERAL_NAME_set0_value(name, type, value);
    sk_GENERAL_NAME_push(names, name);
  }
  X509_add1_ext_i2d(cert.get(), NID_subject_alt_name, names, 0, 0);
  GENERAL_NAMES_free(names);
  return cert;
}

struct verdict {
  bool ok;
  bool has_role;
  peer_role role;
  std::string why;
};

verdict role_of(X509* cert) {
  verdict v{false, false, peer_role::client, {}};
  v.ok = role_in(cert, v.role, v.has_role, v.why);
  return v;
}

} // namespace

TEST_CASE("tls roles: the role a certificate's URI names", "[transport][tls]") {
  for (auto [text, role] : {std::pair{"task", peer_role::task},
                            std::pair{"client", peer_role::client},
                            std::pair{"monitor", peer_role::monitor}}) {
    auto cert = with_names({{GEN_DNS, "host"},
                            {GEN_URI, "https://example.com/other"},
                            {GEN_URI, std::string{"urn:actorflow:role:"}
                                        + text}});
    auto v = role_of(cert.get());
    INFO(text);
    CHECK(v.ok);
    CHECK(v.has_role);
    CHECK(v.role == role);
    CHECK(std::string{to_string(v.role)} == text);
    CHECK_THAT(describe(cert.get()),
               Catch::Contains(std::string{"URI:urn:actorflow:role:"} + text));
  }
  // Made before roles: none, and the peer's names decide.
  auto old = with_names({{GEN_DNS, "client"}});
  auto v = role_of(old.get());
  CHECK(v.ok);
  CHECK_FALSE(v.has_role);
  cert_ptr bare{X509_new(), &X509_free};
  v = role_of(bare.get());
  CHECK(v.ok);
  CHECK_FALSE(v.has_role);
  // The same role twice is that role.
  auto twice = with_names({{GEN_URI, "urn:actorflow:role:monitor"},
                           {GEN_URI, "urn:actorflow:role:monitor"}});
  v = role_of(twice.get());
  CHECK(v.ok);
  CHECK(v.role == peer_role::monitor);
}

TEST_CASE("tls roles: an unknown role or two roles refuse the peer",
          "[transport][tls]") {
  auto unknown = with_names({{GEN_URI, "urn:actorflow:role:admin\n\x1b[2J"}});
  auto v = role_of(unknown.get());
  CHECK_FALSE(v.ok);
  CHECK_THAT(v.why, Catch::Contains("names the unknown role "
                                    "'admin\\n\\x1b[2J' (task, client or "
                                    "monitor)"));
  CHECK(v.why.find('\x1b') == std::string::npos);
  auto two = with_names({{GEN_URI, "urn:actorflow:role:monitor"},
                         {GEN_URI, "urn:actorflow:role:task"}});
  v = role_of(two.get());
  CHECK_FALSE(v.ok);
  CHECK_THAT(v.why, Catch::Contains("names two roles, monitor and task"));
}
