// Builds a graph and runs it in a private session through the installed
// package: prints 7.0 (= 1.0 + 2.0 + 4.0); then builds the trainer's
// softmax model from the installed actorflow::train headers and prints its
// parameter count (784 * 10 + 10 = 7850).
#include <actorflow/actorflow.hpp>
#include <actorflow/train/models.hpp>

#include <iostream>

int main() {
  using namespace actorflow;
  auto a = constant(1.0f);
  auto b = a + 2.0f;
  auto c = b + constant(4.0f);
  session sess;
  std::cout << sess.run(c).to_string() << std::endl;
  graph g;
  auto as_default = g.as_default();
  train::model_options opts;
  opts.kind = "softmax";
  auto m = train::build_model(opts);
  std::cout << "softmax parameters: " << m.parameters << std::endl;
  return sess.run(c).scalar_value<float>() == 7.0f && m.parameters == 7850
           ? 0
           : 1;
}
