// The policy a session gets when vegas_session_options.policy is NULL:
// "vegas" in VEGAS_MODE_VEGAS, and in VEGAS_MODE_AUTO the hybrid with prompt
// lookup, so that auto mode weighs vanilla steps, sparse drafting and lookup
// (ModeChooser), unless token trees (which lookup cannot draft) are asked
// for. An explicit policy is kept as given.
#include <gtest/gtest.h>

#include <string>

#include "api/api_handles.h"
#include "session/session.h"
#include "speculative/speculative_decoder.h"
#include "support/abi_model.h"
#include "support/golden.h"
#include "vegas.h"

namespace vegas {
namespace {

// The policy of a session made with these mode, policy and tree options.
std::string policy_of(vegas_model *model, vegas_decode_mode mode, const char *policy,
                      int32_t tree_branches = 1) {
  vegas_session_options o;
  vegas_session_options_init(&o);
  o.mode = mode;
  o.policy = policy;
  o.tree_branches = tree_branches;
  o.tree_depth = tree_branches > 1 ? 1 : 0;
  o.kv_bytes = 16 << 20;
  vegas_session *session = nullptr;
  EXPECT_EQ(vegas_session_create(model, &o, &session), VEGAS_OK) << vegas_last_error();
  if (session == nullptr) return "";
  const SpeculativeDecoder *spec = session->impl->speculative();
  const std::string name = spec != nullptr ? spec->params().policy : "";
  const bool hybrid = spec != nullptr && spec->hybrid();
  vegas_session_free(session);
  EXPECT_EQ(hybrid, name.find("+lookup") != std::string::npos) << name;
  return name;
}

TEST(AbiSessionDefaults, AutoModeDraftsByLookupToo) {
  vegas_model *model = nullptr;
  ASSERT_EQ(test::load_cpu_model(test::embedded_model_dir(), &model), VEGAS_OK);
  EXPECT_EQ(policy_of(model, VEGAS_MODE_VEGAS, nullptr), "vegas");
  EXPECT_EQ(policy_of(model, VEGAS_MODE_AUTO, nullptr), "vegas+lookup");
  EXPECT_EQ(policy_of(model, VEGAS_MODE_AUTO, nullptr, 2), "vegas") << "trees: no lookup";
  EXPECT_EQ(policy_of(model, VEGAS_MODE_AUTO, "streaming"), "streaming");
  EXPECT_EQ(policy_of(model, VEGAS_MODE_VEGAS, "vegas+lookup"), "vegas+lookup");
  vegas_model_free(model);
}

}  // namespace
}  // namespace vegas
