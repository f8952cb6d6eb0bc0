// A convolution problem through cuDNN's graph (backend) API, the API PyTorch reaches cuDNN through:
// one operation graph of the convolution and its epilogue, y = conv(x, w) + bias + residual, the adds
// fused into the convolution's kernel where an engine can (the legacy API of cudnn_conv.cpp runs the
// bias as a second pass over y). The graph's engine configurations, in the order cuDNN's heuristics
// rank them, become candidates of their own ("cudnn-graph-<rank>"), so that the autotuner times them
// beside our kernels and its cache file remembers which one won. Only deterministic engines are
// offered: a seed must give the same picture on every run.
#include <cudnn.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "core/scratch.h"
#include "core/startup_trace.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/nvidia/cudnn_common.h"
#include "ops/gpu/nvidia/vendor_gemm.h"
#include "ops/tuning/autotuner.h"

namespace hd::gpu {

namespace {

constexpr auto check = cudnn_check;

// An owned backend descriptor.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &d_), "creating a descriptor");
  }
  ~Descriptor() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

  template <class V>
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const V* values, int64_t count,
                  const char* what) {
    check(cudnnBackendSetAttribute(d_, name, type, count, values), what);
    return *this;
  }
  Descriptor& set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& other, const char* what) {
    cudnnBackendDescriptor_t value = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &value, 1, what);
  }
  void finalize(const char* what) { check(cudnnBackendFinalize(d_), what); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using DescriptorPtr = std::unique_ptr<Descriptor>;

// A 4-d tensor in cuDNN's [N, C, H, W] order, laid out as `strides` say.
DescriptorPtr tensor(int64_t uid, cudnnDataType_t type, const int64_t (&dims)[4], const int64_t (&strides)[4],
                     bool is_virtual) {
  auto t = std::make_unique<Descriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = 16;
  const bool virtual_flag = is_virtual;
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1, "tensor type")
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims, 4, "tensor dimensions")
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides, 4, "tensor strides")
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1, "tensor id")
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment, 1, "tensor alignment")
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &virtual_flag, 1, "tensor virtual flag");
  t->finalize("tensor");
  return t;
}

// An activation [n, c, h, w] stored NHWC.
DescriptorPtr nhwc_tensor(int64_t uid, cudnnDataType_t type, int64_t n, int64_t c, int64_t h, int64_t w,
                          bool is_virtual) {
  return tensor(uid, type, {n, c, h, w}, {h * w * c, 1, w * c, c}, is_virtual);
}

// out = a + b, b broadcast when it is the bias.
DescriptorPtr add_operation(const Descriptor& add, const Descriptor& a, const Descriptor& b, const Descriptor& out) {
  auto op = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op->set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, add, "add operation")
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, a, "add input")
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, "add operand")
      .set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out, "add output");
  op->finalize("add operation");
  return op;
}

enum Uid : int64_t { kX = 1, kW, kY, kBias, kResidual, kConvOut, kWithBias };

// The problem as the graph sees it, for the tuning cache's notes: a sized key (ops::sized_key), so that
// a new batch or image size may start from a neighbour's engines.
std::string note_key_of(const GemmProblem& p) {
  const std::string family = str_cat(
      "cudnn ", cudnnGetVersion(), " graph engines on ", device_name(p.device.index), ": ",
      dtype_name(p.dtype), " channels ", p.channels, " kernel ", p.kh, "x", p.kw, " stride ", p.stride,
      " padding ", p.padding, " -> ", p.n, p.bias ? " bias" : "", p.residual ? " residual" : "");
  return ops::sized_key(
      family, p.m(),
      str_cat("images ", p.images, "x", p.height, "x", p.width, " -> ", p.out_height, "x", p.out_width));
}

// The operation graph of one problem shape, its deterministic engine configurations in the heuristics'
// order, and the execution plans finalized so far (lazily: finalizing may compile a kernel). `ranks`
// maps each family's rank to its configuration.
struct ShapePlans {
  std::vector<DescriptorPtr> keep;  // tensors and operations the graph refers to
  DescriptorPtr graph;
  std::vector<DescriptorPtr> configs;
  std::vector<std::string> specs;  // each configuration as the tuning cache notes it
  std::vector<int> ranks[2];  // [CudnnEngines]
  std::vector<DescriptorPtr> plans;  // null until finalized
  std::vector<int64_t> workspace;
  std::vector<bool> failed;
};

// At most kCudnnGraphCandidates engine configurations of each family become candidates: the heuristics
// rank the likely fastest first, and each candidate is timed once per shape.
constexpr int64_t kMaxWorkspace = int64_t(256) << 20;

struct EngineTraits {
  bool deterministic = true;
  bool runtime_compiled = false;
};

// The engine of a configuration.
DescriptorPtr engine_of(const Descriptor& config) {
  auto engine = std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t engine_handle = engine->get();
  int64_t count = 0;
  check(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                 &engine_handle),
        "reading a configuration's engine");
  return engine;
}

// From the engine's numerical and behaviour notes.
EngineTraits traits_of(const Descriptor& engine) {
  // Whether the engine's notes of one kind (numerical or behaviour) include `note`.
  const auto has_note = [&](cudnnBackendAttributeName_t attribute, cudnnBackendAttributeType_t type, auto note,
                            int64_t kinds, const char* what) {
    std::vector<decltype(note)> notes(static_cast<size_t>(kinds));
    int64_t returned = 0;
    check(cudnnBackendGetAttribute(engine.get(), attribute, type, kinds, &returned, notes.data()), what);
    return std::find(notes.begin(), notes.begin() + returned, note) != notes.begin() + returned;
  };
  EngineTraits traits;
  traits.deterministic = !has_note(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                   CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                   "reading an engine's numerical notes");
  traits.runtime_compiled = has_note(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                     CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT,
                                     "reading an engine's behaviour notes");
  return traits;
}

// A configuration written as "E<engine's global index>" and ".<knob type>=<value>" for each knob: what
// rebuilds it without the heuristics.
std::string spec_of(const Descriptor& config, const Descriptor& engine) {
  int64_t index = 0, count = 0;
  check(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index),
        "reading an engine's index");
  std::vector<DescriptorPtr> choices;
  std::vector<cudnnBackendDescriptor_t> handles;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    choices.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    handles.push_back(choices.back()->get());
  }
  int64_t returned = 0;
  check(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 int64_t(handles.size()), &returned, handles.data()),
        "reading a configuration's knobs");
  std::string spec = str_cat("E", index);
  for (int64_t i = 0; i < returned; ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0;
    check(cudnnBackendGetAttribute(handles[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &count,
                                   &type),
          "reading a knob's type");
    check(cudnnBackendGetAttribute(handles[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &count,
                                   &value),
          "reading a knob's value");
    spec += str_cat(".", int(type), "=", value);
  }
  return spec;
}

// The configuration `spec` (spec_of's form) on s's graph; its engine and knobs kept in s.
DescriptorPtr config_of(ShapePlans& s, std::string_view spec) {
  const auto number = [&](std::string_view text) {
    int64_t v = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
    HD_CHECK(error == std::errc() && end == text.data() + text.size(), "cuDNN graph API: a malformed note '", spec, "'");
    return v;
  };
  HD_CHECK(spec.size() > 1 && spec[0] == 'E', "cuDNN graph API: a malformed note '", spec, "'");
  std::vector<std::string_view> parts;
  for (size_t start = 1;;) {
    const size_t dot = spec.find('.', start);
    parts.push_back(spec.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  auto engine = std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  const int64_t index = number(parts[0]);
  const cudnnBackendDescriptor_t graph = s.graph->get();
  engine->set(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &graph, 1, "engine graph")
      .set(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, &index, 1, "engine index");
  engine->finalize("engine");
  std::vector<cudnnBackendDescriptor_t> knobs;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t equals = parts[i].find('=');
    HD_CHECK(equals != std::string_view::npos, "cuDNN graph API: a malformed note '", spec, "'");
    const auto type = cudnnBackendKnobType_t(number(parts[i].substr(0, equals)));
    const int64_t value = number(parts[i].substr(equals + 1));
    auto choice = std::make_unique<Descriptor>(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    choice->set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, &type, 1, "knob type")
        .set(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, &value, 1, "knob value");
    choice->finalize("knob choice");
    knobs.push_back(choice->get());
    s.keep.push_back(std::move(choice));
  }
  auto config = std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  config->set_descriptor(CUDNN_ATTR_ENGINECFG_ENGINE, *engine, "configuration engine");
  if (!knobs.empty())
    config->set(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, knobs.data(), int64_t(knobs.size()),
                "configuration knobs");
  config->finalize("engine configuration");
  s.keep.push_back(std::move(engine));
  return config;
}

// The note of s's configurations: the precompiled family's in rank order, "|", the other's.
std::string note_of(const ShapePlans& s) {
  std::string note;
  for (const int family : {0, 1}) {
    if (family == 1) note += '|';
    for (size_t i = 0; i < s.ranks[family].size(); ++i)
      note += (i > 0 ? " " : "") + s.specs[size_t(s.ranks[family][i])];
  }
  return note;
}

void configs_from_note(ShapePlans& s, std::string_view note) {
  const size_t bar = note.find('|');
  HD_CHECK(bar != std::string_view::npos, "cuDNN graph API: a malformed note '", note, "'");
  for (const int family : {0, 1}) {
    std::string_view list = family == 0 ? note.substr(0, bar) : note.substr(bar + 1);
    while (!list.empty()) {
      const size_t space = list.find(' ');
      const std::string_view spec = list.substr(0, space);
      s.ranks[family].push_back(int(s.configs.size()));
      s.configs.push_back(config_of(s, spec));
      s.specs.emplace_back(spec);
      list = space == std::string_view::npos ? std::string_view() : list.substr(space + 1);
    }
  }
}

// The deterministic configurations cuDNN's heuristics rank for s's graph, at most kCudnnGraphCandidates
// of each family.
void configs_from_heuristics(ShapePlans& s) {
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *s.graph, "heuristics graph")
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1, "heuristics mode");
  heuristics.finalize("heuristics");
  int64_t available = 0;
  check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                 &available, nullptr),
        "counting the heuristics' results");
  std::vector<DescriptorPtr> configs;
  std::vector<cudnnBackendDescriptor_t> handles;
  for (int64_t i = 0; i < available; ++i) {
    configs.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    handles.push_back(configs.back()->get());
  }
  int64_t returned = 0;
  if (available > 0) {
    check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                   available, &returned, handles.data()),
          "reading the heuristics' results");
  }
  for (int64_t i = 0; i < returned; ++i) {
    const DescriptorPtr engine = engine_of(*configs[size_t(i)]);
    const EngineTraits traits = traits_of(*engine);
    std::vector<int>& ranks = s.ranks[int(traits.runtime_compiled ? CudnnEngines::kRuntimeCompiled : CudnnEngines::kPrecompiled)];
    if (!traits.deterministic || int(ranks.size()) >= kCudnnGraphCandidates) continue;
    ranks.push_back(int(s.configs.size()));
    s.specs.push_back(spec_of(*configs[size_t(i)], *engine));
    s.configs.push_back(std::move(configs[size_t(i)]));
  }
}

// s's operation graph for p, through `handle`.
std::unique_ptr<ShapePlans> build_graph(const GemmProblem& p, cudnnHandle_t handle) {
  auto s = std::make_unique<ShapePlans>();
  const cudnnDataType_t io = p.dtype == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const auto keep = [&](DescriptorPtr d) -> Descriptor& {
    s->keep.push_back(std::move(d));
    return *s->keep.back();
  };
  Descriptor& x = keep(nhwc_tensor(kX, io, p.images, p.channels, p.height, p.width, false));
  // The filter [K, C, R, S] stored as our [Cout, kh, kw, Cin]: KRSC strides.
  Descriptor& filter = keep(tensor(kW, io, {p.n, p.channels, p.kh, p.kw},
                                   {int64_t(p.kh) * p.kw * p.channels, 1, int64_t(p.kw) * p.channels, p.channels},
                                   false));

  // The convolution: cross-correlation, f32 accumulation; padding before = p.padding, after = whatever
  // makes the output size (the VAE encoder's extra bottom/right zeros included).
  Descriptor& conv = keep(std::make_unique<Descriptor>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  {
    const int64_t dims = 2, dilation[2] = {1, 1}, stride[2] = {p.stride, p.stride};
    const int64_t pre[2] = {p.padding, p.padding};
    const int64_t post[2] = {(p.out_height - 1) * p.stride + p.kh - p.height - p.padding,
                             (p.out_width - 1) * p.stride + p.kw - p.width - p.padding};
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32, 1, "convolution precision")
        .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, 1, "convolution mode")
        .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &dims, 1, "convolution dimensions")
        .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilation, 2, "convolution dilation")
        .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, stride, 2, "convolution stride")
        .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pre, 2, "convolution padding")
        .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, post, 2, "convolution end padding");
    conv.finalize("convolution");
  }
  const bool has_bias = p.bias != nullptr, has_residual = p.residual != nullptr;
  Descriptor& y = keep(nhwc_tensor(kY, io, p.images, p.n, p.out_height, p.out_width, false));
  // The convolution writes y itself when nothing follows it, else an f32 intermediate in registers.
  Descriptor& conv_out = has_bias || has_residual
                             ? keep(nhwc_tensor(kConvOut, f32, p.images, p.n, p.out_height, p.out_width, true))
                             : y;
  std::vector<cudnnBackendDescriptor_t> ops;
  {
    Descriptor& op = keep(std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
    const float alpha = 1.0f, beta = 0.0f;
    op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x, "convolution input")
        .set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, filter, "convolution filter")
        .set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, conv_out, "convolution output")
        .set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv, "convolution descriptor")
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha, 1, "convolution alpha")
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta, 1, "convolution beta");
    op.finalize("convolution operation");
    ops.push_back(op.get());
  }
  if (has_bias || has_residual) {
    Descriptor& add = keep(std::make_unique<Descriptor>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    const cudnnPointwiseMode_t mode = CUDNN_POINTWISE_ADD;
    add.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode, 1, "add mode")
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &f32, 1, "add precision");
    add.finalize("add");
    Descriptor* current = &conv_out;
    if (has_bias) {
      Descriptor& bias = keep(nhwc_tensor(kBias, io, 1, p.n, 1, 1, false));
      Descriptor& sum = has_residual ? keep(nhwc_tensor(kWithBias, f32, p.images, p.n, p.out_height, p.out_width, true)) : y;
      ops.push_back(keep(add_operation(add, *current, bias, sum)).get());
      current = &sum;
    }
    if (has_residual) {
      Descriptor& residual = keep(nhwc_tensor(kResidual, io, p.images, p.n, p.out_height, p.out_width, false));
      ops.push_back(keep(add_operation(add, *current, residual, y)).get());
    }
  }
  s->graph = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  s->graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), int64_t(ops.size()),
                "graph operations")
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1, "graph handle");
  s->graph->finalize("operation graph");
  return s;
}

// The execution plan of `config` (finalizing it may compile a kernel).
DescriptorPtr plan_of(const Descriptor& config, cudnnHandle_t handle) {
  auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan->set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config, "plan configuration")
      .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1, "plan handle");
  plan->finalize("execution plan");
  return plan;
}

// p's graph and its candidate configurations.
std::unique_ptr<ShapePlans> build_plans(const GemmProblem& p) {
  std::unique_ptr<ShapePlans> s = build_graph(p, cudnn_handle(p.device.index));
  // A configuration is an engine of cuDNN's (its global index) and the values of its knobs: what the
  // heuristics ranked for this shape before, on this cuDNN and device, is rebuilt from the tuning cache's
  // note without asking them again; under the quick policy a shape without a note takes its nearest
  // neighbour's ranking (4 ms of heuristics saved per new shape) and keeps it as its own, so that a later
  // process builds the same engine for the rank chosen now.
  const std::string note_key = note_key_of(p);
  bool noted = false;
  if (const ops::LibraryNote note = ops::library_note(note_key); !note.value.empty()) {
    try {
      configs_from_note(*s, note.value);
      noted = true;
      if (note.near) ops::remember_library_note(note_key, note.value, true);
    } catch (const Error&) {  // a note this cuDNN (or this shape) does not take: the heuristics are asked
      s->configs.clear();
      s->specs.clear();
      s->ranks[0].clear();
      s->ranks[1].clear();
    }
  }
  if (!noted) {
    const StartupSpan span(startup_trace_on() ? "cuDNN graph heuristics" : "");
    configs_from_heuristics(*s);
    ops::remember_library_note(note_key, note_of(*s));
  }
  s->plans.resize(s->configs.size());
  s->workspace.assign(s->configs.size(), 0);
  s->failed.assign(s->configs.size(), false);
  return s;
}

using ShapeKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int,
                            bool, bool>;

ShapeKey key_of(const GemmProblem& p) {
  return {p.device.index, int(p.dtype), p.images, p.height, p.width, p.channels, p.n, p.out_height, p.out_width,
          p.kh, p.kw, p.stride, p.padding, p.bias != nullptr, p.residual != nullptr};
}

std::mutex plans_mutex;

ShapePlans& plans_for(const GemmProblem& p) {
  static std::map<ShapeKey, std::unique_ptr<ShapePlans>> all;  // process lifetime
  const std::lock_guard lock(plans_mutex);
  auto& slot = all[key_of(p)];
  if (!slot) {
    try {
      const StartupSpan span(startup_trace_on() ? "cuDNN graph configurations" : "");
      slot = build_plans(p);
    } catch (const Error&) {
      slot = std::make_unique<ShapePlans>();  // no graph for this shape: no candidates
    }
  }
  return *slot;
}

}  // namespace

void cudnn_graph_warm_up(cudnnHandle_t handle, const GemmProblem& p) {
  std::unique_ptr<ShapePlans> s = build_graph(p, handle);
  configs_from_heuristics(*s);
  if (s->configs.empty()) return;
  (void)plan_of(*s->configs[0], handle);
}

bool cudnn_graph_can_run(const GemmProblem& p) {
  // A plain NHWC convolution of 16-byte aligned tensors, one problem (no batch of problems), dense pixels,
  // C and the residual separate (an engine may read the residual after writing C).
  return (p.dtype == DType::kF16 || p.dtype == DType::kBF16) && p.outer * p.inner == 1 &&
         p.pixel_stride == p.channels && p.ldb == int64_t(p.kh) * p.kw * p.channels && p.ldc == p.n &&
         p.alpha == 1.0f && p.channels % 8 == 0 && p.n % 8 == 0 && is_aligned(p.a, 16) && is_aligned(p.b, 16) &&
         is_aligned(p.c, 16) && is_aligned(p.bias, 16) && is_aligned(p.residual, 16) &&
         (p.residual == nullptr || p.residual != p.c) && p.m() * p.n < (int64_t(1) << 31);
}

void cudnn_graph_conv(const GemmProblem& p, CudnnEngines family, int rank, void* c) {
  HD_CHECK_KIND(!(p.residual != nullptr && p.residual == c), ErrorKind::kUnsupported,
                "cuDNN graph API: the residual may not be the output");
  ShapePlans& s = plans_for(p);
  const std::vector<int>& ranks = s.ranks[int(family)];
  HD_CHECK_KIND(rank >= 0 && size_t(rank) < ranks.size(), ErrorKind::kUnsupported, "cuDNN graph API: no engine ",
                rank, " for this convolution");
  cudnnHandle_t handle = cudnn_handle(p.device.index);
  const Descriptor* plan = nullptr;
  int64_t workspace_size = 0;
  {
    const std::lock_guard lock(plans_mutex);
    const size_t r = size_t(ranks[size_t(rank)]);
    HD_CHECK_KIND(!s.failed[r], ErrorKind::kUnsupported, "cuDNN graph API: engine ", rank,
                  " cannot run this convolution");
    if (!s.plans[r]) {
      try {
        const StartupSpan span(startup_trace_on() ? str_cat("cuDNN plan ", int(family), "-", rank) : "");
        DescriptorPtr built = plan_of(*s.configs[r], handle);
        int64_t size = 0, count = 0;
        check(cudnnBackendGetAttribute(built->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                       &count, &size),
              "reading the plan's workspace size");
        HD_CHECK_KIND(size <= kMaxWorkspace, ErrorKind::kUnsupported, "cuDNN graph API: engine ", rank, " wants ",
                      size, " bytes of workspace");
        s.workspace[r] = size;
        s.plans[r] = std::move(built);
      } catch (const Error&) {
        s.failed[r] = true;
        throw;
      }
    }
    plan = s.plans[r].get();
    workspace_size = s.workspace[r];
  }
  // The device's GEMM scratch (core/scratch.h), not a buffer per call.
  void* workspace_pointer = workspace_size > 0 ? scratch(p.device, size_t(workspace_size), ScratchSlot::kGemm) : nullptr;
  check(cudnnSetStream(handle, static_cast<cudaStream_t>(native_stream(p.device))), "cudnnSetStream");
  std::vector<int64_t> uids{kX, kW, kY};
  std::vector<void*> pointers{const_cast<void*>(p.a), const_cast<void*>(p.b), c};
  if (p.bias != nullptr) uids.push_back(kBias), pointers.push_back(const_cast<void*>(p.bias));
  if (p.residual != nullptr) uids.push_back(kResidual), pointers.push_back(const_cast<void*>(p.residual));
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), int64_t(uids.size()), "variant ids")
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(), int64_t(pointers.size()),
           "variant pointers")
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace_pointer, 1, "variant workspace");
  pack.finalize("variant pack");
  check(cudnnBackendExecute(handle, plan->get(), pack.get()), "executing the plan");
}

}  // namespace hd::gpu
