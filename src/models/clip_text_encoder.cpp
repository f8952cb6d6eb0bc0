#include "models/clip_text_encoder.h"

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "models/weights.h"
#include "ops/ops.h"

namespace hd {

namespace {

// Where the encoder's names start: transformers 5 saves "embeddings...", transformers 4 (and the
// single-file name table) "text_model.embeddings...".
std::string find_prefix(const ModelComponent& c) {
  for (const char* prefix : {"", "text_model."}) {
    if (c.find(std::string(prefix) + "embeddings.token_embedding.weight")) return prefix;
  }
  HD_CHECK_KIND(!(c.find("model.token_embedding.weight") || c.find("token_embedding.weight")), ErrorKind::kUnsupported,
                c.name, ": an OpenCLIP-format text encoder (SD2.x single-file checkpoint); converting its names is "
                        "not implemented yet: use the diffusers folder of the model");
  throw Error(ErrorKind::kInvalidInput,
              str_cat(c.name, ": not a CLIP text encoder (no embeddings.token_embedding.weight)"));
}

std::string layer_name(int64_t i, const char* rest) { return "encoder.layers." + std::to_string(i) + "." + rest; }

}  // namespace

ClipTextConfig ClipTextConfig::detect(const ModelComponent& component) {
  const WeightReader w(component, find_prefix(component));
  ClipTextConfig c;
  const auto tok = w.shape("embeddings.token_embedding.weight");
  const auto pos = w.shape("embeddings.position_embedding.weight");
  HD_CHECK(tok.size() == 2 && pos.size() == 2 && pos[1] == tok[1], component.name,
           ": token and position embeddings disagree in shape");
  c.vocab = tok[0];
  c.width = tok[1];
  c.max_positions = pos[0];
  while (w.has(layer_name(c.layers, "layer_norm1.weight"))) ++c.layers;
  HD_CHECK(c.layers > 0, component.name, ": no encoder layers found");
  const auto fc1 = w.shape(layer_name(0, "mlp.fc1.weight"));
  HD_CHECK(fc1.size() == 2, component.name, ": mlp.fc1.weight is not a matrix");
  c.intermediate = fc1[0];
  c.heads = c.width / 64;
  c.quick_gelu = c.width == 768;
  {
    const nlohmann::json j = component_config(component);
    if (j.contains("num_attention_heads")) c.heads = j["num_attention_heads"].get<int64_t>();
    if (j.contains("hidden_act")) {
      const std::string act = j["hidden_act"].get<std::string>();
      HD_CHECK_KIND(act == "quick_gelu" || act == "gelu", ErrorKind::kUnsupported, component.name,
                    ": unsupported hidden_act '", act, "'");
      c.quick_gelu = act == "quick_gelu";
    }
    if (j.contains("layer_norm_eps")) c.eps = j["layer_norm_eps"].get<float>();
    if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) c.eos_token_id = j["eos_token_id"].get<int64_t>();
  }
  // CLIPTextModelWithProjection keeps its projection beside text_model., not under it.
  if (const TensorRef* p = component.find("text_projection.weight")) {
    const auto shape = p->shape();
    HD_CHECK(shape.size() == 2 && shape[1] == c.width, component.name,
             ": text_projection.weight must be a [projection_dim, ", c.width, "] matrix");
    c.projection_dim = shape[0];
  }
  HD_CHECK(c.heads > 0 && c.width % c.heads == 0, component.name, ": width ", c.width, " does not split into ",
           c.heads, " heads");
  return c;
}

ClipTextEncoder ClipTextEncoder::load(const ModelComponent& component, const ops::Placement& placement) {
  ClipTextEncoder e;
  e.config_ = ClipTextConfig::detect(component);
  e.placement_ = placement;
  const ClipTextConfig& c = e.config_;
  const WeightReader w(component, find_prefix(component), placement);
  e.token_embedding_ = w.load("embeddings.token_embedding.weight", Shape{c.vocab, c.width});
  e.position_embedding_ = w.load("embeddings.position_embedding.weight", Shape{c.max_positions, c.width});
  const auto norm = [&](const std::string& name) {
    return Norm{w.load(name + ".weight", Shape{c.width}), w.load(name + ".bias", Shape{c.width})};
  };
  const auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return Linear{w.load(name + ".weight", Shape{out, in}), w.load(name + ".bias", Shape{out})};
  };
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "encoder.layers." + std::to_string(i) + ".";
    e.layers_.push_back(Layer{norm(p + "layer_norm1"), norm(p + "layer_norm2"),
                              linear(p + "self_attn.q_proj", c.width, c.width),
                              linear(p + "self_attn.k_proj", c.width, c.width),
                              linear(p + "self_attn.v_proj", c.width, c.width),
                              linear(p + "self_attn.out_proj", c.width, c.width),
                              linear(p + "mlp.fc1", c.intermediate, c.width),
                              linear(p + "mlp.fc2", c.width, c.intermediate)});
  }
  e.final_norm_ = norm("final_layer_norm");
  if (c.projection_dim > 0) {
    e.projection_ = WeightReader(component, "", placement).load("text_projection.weight", Shape{c.projection_dim, c.width});
  }
  return e;
}

template <typename Fn>
void ClipTextEncoder::for_each_weight(Fn&& fn) {
  const auto norm = [&](Norm& n) { fn(n.gamma), fn(n.beta); };
  const auto linear = [&](Linear& l) { fn(l.weight), fn(l.bias); };
  fn(token_embedding_), fn(position_embedding_);
  for (Layer& layer : layers_) {
    norm(layer.norm1), norm(layer.norm2);
    for (Linear* l : {&layer.q, &layer.k, &layer.v, &layer.out, &layer.fc1, &layer.fc2}) linear(*l);
  }
  norm(final_norm_);
  if (config_.projection_dim > 0) fn(projection_);
}

void ClipTextEncoder::move_weights(const Device& device) {
  if (weights_on(device)) return;
  const Device gpu = placement_.device;
  if (device.is_gpu()) {
    // From the page-locked copies, which stay for the next trip back (weights never change).
    host_copies_.clear();
    for_each_weight([&](OwnedTensor& t) {
      OwnedTensor moved(t.view().shape, t.view().dtype, device);
      ops::copy(t, moved);
      host_copies_.push_back(std::move(t));
      t = std::move(moved);
    });
  } else if (!host_copies_.empty()) {
    // Back to the copies kept: the device's are freed once the work queued on them is done (below).
    size_t i = 0;
    for_each_weight([&](OwnedTensor& t) { t = std::move(host_copies_[i++]); });
    host_copies_.clear();
  } else {
    // The first trip to the host: into page-locked memory (SDXL's 1.6 GB of encoders took 1.15 s a trip
    // back to the device from pageable memory), or ordinary memory where the system will not lock more.
    bool locked = true;
    for_each_weight([&](OwnedTensor& t) {
      OwnedTensor moved;
      if (locked) {
        try {
          moved = OwnedTensor::pinned_host(t.view().shape, t.view().dtype, gpu);
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::kOutOfMemory) throw;
          locked = false;
        }
      }
      if (!locked) moved = OwnedTensor(t.view().shape, t.view().dtype);
      ops::copy(t, moved);
      t = std::move(moved);
    });
  }
  // The whole move (and the encodes that read the old copies) finished before its caller goes on.
  ops::synchronize(gpu);
}

OwnedTensor ClipTextEncoder::forward(const Tensor& ids) const {
  return encode(ids, ClipHiddenState::kLastNormed, false).hidden;
}

ClipTextOutput ClipTextEncoder::encode(const Tensor& ids, ClipHiddenState state, bool pooled) const {
  const ClipTextConfig& c = config_;
  HD_CHECK(ids.rank() == 2 && ids.dim(1) <= c.max_positions && ids.dtype == DType::kI32, "text encoder: ids ",
           ids.describe(), " must be i32 [batch, <= ", c.max_positions, "]");
  HD_CHECK(!pooled || c.projection_dim > 0, "text encoder: a pooled embedding needs text_projection.weight, which "
           "this encoder does not have (SDXL's second text encoder, CLIPTextModelWithProjection, has one)");
  HD_CHECK(!pooled || ids.device.is_cpu(), "text encoder: ids must be in host memory for a pooled embedding");
  const int64_t b = ids.dim(0), l = ids.dim(1);
  const Tensor& table = token_embedding_.view();
  OwnedTensor x = OwnedTensor::like(table, Shape{b, l, c.width});  // the residual stream
  if (ids.device == table.device) {
    ops::embedding(ids, table, x);
  } else {  // host ids for a GPU model: moved next to the table first
    OwnedTensor moved(ids.shape, ids.dtype, table.device);
    ops::copy(ids, moved);
    ops::embedding(moved, table, x);
  }
  ops::add(x, position_embedding_.view().slice(0, 0, l), x);

  const Shape stream{b, l, c.width};
  OwnedTensor h = OwnedTensor::like(x, stream), q = OwnedTensor::like(x, stream), k = OwnedTensor::like(x, stream),
              v = OwnedTensor::like(x, stream), a = OwnedTensor::like(x, stream);
  OwnedTensor mlp = OwnedTensor::like(x, Shape{b, l, c.intermediate});
  ClipTextOutput out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (state == ClipHiddenState::kPenultimate && i + 1 == layers_.size()) {
      // hidden_states[-2]: the stream as the last layer receives it. Without a pooled embedding to make,
      // the last layer is not needed.
      out.hidden = OwnedTensor::like(x, stream);
      ops::copy(x, out.hidden);
      if (!pooled) return out;
    }
    const Layer& layer = layers_[i];
    // Self-attention block, pre-norm, causal: token i sees tokens <= i.
    ops::layer_norm(x, layer.norm1.gamma, layer.norm1.beta, c.eps, h);
    ops::linear(h, layer.q.weight, &layer.q.bias.view(), q);
    ops::linear(h, layer.k.weight, &layer.k.bias.view(), k);
    ops::linear(h, layer.v.weight, &layer.v.bias.view(), v);
    ops::attention(q, k, v, {int(c.heads), /*causal=*/true, 0.0f}, a);
    ops::linear(a, layer.out.weight, &layer.out.bias.view(), &x.view(), x);  // the residual added in place
    // MLP block.
    ops::layer_norm(x, layer.norm2.gamma, layer.norm2.beta, c.eps, h);
    ops::linear(h, layer.fc1.weight, &layer.fc1.bias.view(), mlp);  // [B, L, intermediate]
    if (c.quick_gelu) {
      ops::quick_gelu(mlp, mlp);
    } else {
      ops::gelu(mlp, ops::GeluApproximation::kNone, mlp);
    }
    ops::linear(mlp, layer.fc2.weight, &layer.fc2.bias.view(), &x.view(), x);
  }
  OwnedTensor normed = OwnedTensor::like(x, stream);
  ops::layer_norm(x, final_norm_.gamma, final_norm_.beta, c.eps, normed);
  if (pooled) {
    // The end-of-text token's normed state of each sequence, then the projection (no bias).
    OwnedTensor rows = OwnedTensor::like(x, Shape{b, c.width});
    for (int64_t s = 0; s < b; ++s) {
      const int32_t* row = static_cast<const int32_t*>(ids.data) + s * ids.strides[0];
      int64_t at = 0;
      if (c.eos_token_id == 2) {
        for (int64_t t = 1; t < l; ++t) at = row[t] > row[at] ? t : at;  // the first largest id
      } else {
        while (at + 1 < l && row[at] != c.eos_token_id) ++at;
        HD_CHECK(row[at] == c.eos_token_id, "text encoder: sequence ", s, " holds no end-of-text token (id ",
                 c.eos_token_id, ") to pool");
      }
      ops::copy(normed.view().slice(0, s, 1).slice(1, at, 1).reshape(Shape{1, c.width}), rows.view().slice(0, s, 1));
    }
    out.pooled = OwnedTensor::like(x, Shape{b, c.projection_dim});
    ops::linear(rows, projection_, nullptr, out.pooled);
  }
  if (state == ClipHiddenState::kLastNormed) out.hidden = std::move(normed);
  return out;
}

}  // namespace hd
