// What a refusal log line says about a peer's certificate: its names come
// from the peer, and reach the log escaped (one line, no terminal escapes).

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include <openssl/x509v3.h>

#include "tls_context.hpp"

using namespace actorflow;

TEST_CASE("tls: a certificate's names are escaped where a log line shows "
          "them",
          "[transport][tls]") {
  std::unique_ptr<X509, decltype(&X509_free)> cert{X509_new(), &X509_free};
  REQUIRE(cert);
  auto* names = sk_GENERAL_NAME_new_null();
  auto add = [&](const std::string& dns) {
    auto* name = GENERAL_NAME_new();
    auto* text = ASN1_IA5STRING_new();
    ASN1_STRING_set(text, dns.data(), static_cast<int>(dns.size()));
    GENERAL_NAME_set0_value(name, GEN_DNS, text);
    sk_GENERAL_NAME_push(names, name);
  };
  add("ps-0.example");
  add("x\nactorflow: warning: forged\x1b[2J");
  REQUIRE(X509_add1_ext_i2d(cert.get(), NID_subject_alt_name, names, 0, 0) == 1);
  GENERAL_NAMES_free(names);
  auto line = tls_detail::describe(cert.get());
  CHECK(line.find('\n') == std::string::npos);
  CHECK(line.find('\x1b') == std::string::npos);
  CHECK_THAT(line, Catch::Contains("DNS:ps-0.example, "
                                   "DNS:x\\nactorflow: warning: "
                                   "forged\\x1b[2J"));
}
