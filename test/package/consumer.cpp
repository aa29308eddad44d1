// Builds a graph and runs it in a private session through the installed
// package: prints 7.0 (= 1.0 + 2.0 + 4.0).
#include <actorflow/actorflow.hpp>

#include <iostream>

int main() {
  using namespace actorflow;
  auto a = constant(1.0f);
  auto b = a + 2.0f;
  auto c = b + constant(4.0f);
  session sess;
  std::cout << sess.run(c).to_string() << std::endl;
  return sess.run(c).scalar_value<float>() == 7.0f ? 0 : 1;
}
