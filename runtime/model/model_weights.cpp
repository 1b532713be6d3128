#include "model/model_weights.h"

#include <string>

#include "common/error.h"

namespace vegas {

ModelWeights bind_model_weights(const ModelConfig &c, const WeightStore &store) {
  const int64_t hidden = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  const int64_t vocab = c.vocab_size;
  auto need = [&store](const std::string &name, std::vector<int64_t> shape) {
    return &store.require(name, shape);
  };

  ModelWeights w;
  w.embed = need("model.embed_tokens.weight", {vocab, hidden});
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int32_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights &l = w.layers[static_cast<size_t>(i)];
    l.attn_norm = need(p + "input_layernorm.weight", {hidden});
    l.wq = need(p + "self_attn.q_proj.weight", {c.q_dim(), hidden});
    l.wk = need(p + "self_attn.k_proj.weight", {c.kv_dim(), hidden});
    l.wv = need(p + "self_attn.v_proj.weight", {c.kv_dim(), hidden});
    if (c.attention_bias) {
      l.bq = need(p + "self_attn.q_proj.bias", {c.q_dim()});
      l.bk = need(p + "self_attn.k_proj.bias", {c.kv_dim()});
      l.bv = need(p + "self_attn.v_proj.bias", {c.kv_dim()});
    }
    if (c.qk_norm) {
      l.q_norm = need(p + "self_attn.q_norm.weight", {c.head_dim});
      l.k_norm = need(p + "self_attn.k_norm.weight", {c.head_dim});
    }
    l.wo = need(p + "self_attn.o_proj.weight", {hidden, c.q_dim()});
    if (c.o_bias) l.bo = need(p + "self_attn.o_proj.bias", {hidden});
    l.mlp_norm = need(p + "post_attention_layernorm.weight", {hidden});
    l.w_gate = need(p + "mlp.gate_proj.weight", {inter, hidden});
    l.w_up = need(p + "mlp.up_proj.weight", {inter, hidden});
    l.w_down = need(p + "mlp.down_proj.weight", {hidden, inter});
    if (c.mlp_bias) {
      l.b_gate = need(p + "mlp.gate_proj.bias", {inter});
      l.b_up = need(p + "mlp.up_proj.bias", {inter});
      l.b_down = need(p + "mlp.down_proj.bias", {hidden});
    }
  }
  // Layers past config.json's count would be ignored: a config that lists
  // fewer layers than its checkpoint holds is the wrong config, not a smaller
  // model (issue P1, hostile files).
  const std::string layers = "model.layers.";
  for (const auto &entry : store.tensors()) {
    const std::string &name = entry.first;
    if (name.compare(0, layers.size(), layers) != 0) continue;
    const size_t dot = name.find('.', layers.size());
    const std::string index = name.substr(layers.size(), dot - layers.size());
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) continue;
    if (index.size() > 9 || std::stoi(index) >= c.n_layers)
      fail(VEGAS_ERR_FORMAT, "the checkpoint holds " + name + ", past the " +
                                 std::to_string(c.n_layers) +
                                 " layers config.json lists (num_hidden_layers)");
  }
  w.final_norm = need("model.norm.weight", {hidden});
  // Tied checkpoints usually omit lm_head; when one is present anyway,
  // transformers ties it to the embedding regardless, so it is ignored.
  w.lm_head = c.tie_word_embeddings ? w.embed : need("lm_head.weight", {vocab, hidden});
  return w;
}

}  // namespace vegas
