// The structs behind the opaque handles of vegas.h.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"
#include "vegas.h"

// A tokenizer handle either owns its tokenizer (vegas_tokenizer_load) or
// borrows the one of a model (vegas_model_tokenizer).
struct vegas_tokenizer {
  std::unique_ptr<vegas::Tokenizer> owned;
  const vegas::Tokenizer *impl = nullptr;
};

struct vegas_model {
  std::shared_ptr<vegas::Model> impl;
  vegas_tokenizer tokenizer;  // borrows impl->tokenizer()
  std::string dir;            // what vegas_model_load was given; "" for a synthetic model
};

struct vegas_session {
  std::unique_ptr<vegas::Session> impl;
};

struct vegas_detokenizer {
  std::unique_ptr<vegas::StreamingDetokenizer> impl;
};
