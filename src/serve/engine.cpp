#include "serve/engine.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "io/model_source.h"
#include "models/blocks.h"
#include "pipeline/infotext.h"

namespace hd::serve {

namespace {

std::exception_ptr cancelled_error() {
  return std::make_exception_ptr(Error(ErrorKind::kCancelled, "the generation was cancelled"));
}

}  // namespace

std::string_view job_state_name(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kDone:
      return "done";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "?";
}

// ---- Job ----

JobProgress Job::progress() const {
  std::lock_guard lock(mutex_);
  JobProgress p;
  p.state = state_;
  p.steps_done = steps_done_;
  p.steps_total = steps_total_;
  if (started_) {
    const auto until = ended_at_.value_or(std::chrono::steady_clock::now());
    p.seconds_running = std::chrono::duration<double>(until - *started_).count();
  }
  return p;
}

const GenerationResult& Job::wait() const {
  std::unique_lock lock(mutex_);
  ended_.wait(lock, [&] { return ended_locked(); });
  if (error_) std::rethrow_exception(error_);
  return result_;
}

bool Job::wait_for(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return ended_.wait_for(lock, timeout, [&] { return ended_locked(); });
}

std::string Job::model_name() const {
  std::lock_guard lock(mutex_);
  return model_name_;
}

int Job::worker() const {
  std::lock_guard lock(mutex_);
  return worker_;
}

void Job::cancel() {
  cancel_requested_ = true;
  end_if_queued();
}

void Job::end_if_queued() {
  {
    std::lock_guard lock(mutex_);
    if (worker_ >= 0 || ended_locked()) return;
    state_ = JobState::kCancelled;
    error_ = cancelled_error();
  }
  ended_.notify_all();
}

void Job::end(JobState state, std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    state_ = state;
    error_ = std::move(error);
    if (started_) ended_at_ = std::chrono::steady_clock::now();
  }
  ended_.notify_all();
}

// ---- Engine: the callers' side ----

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
  HD_CHECK(!options_.catalogue.entries().empty(), "a serving engine needs at least one model");
  HD_CHECK(options_.max_queue >= 1, "the queue must hold at least one job");
  HD_CHECK(options_.max_batch_rows >= 1, "a UNet batch holds at least one row, got ",
           options_.max_batch_rows);
  HD_CHECK(options_.keep_models >= 1, "a worker keeps at least one model loaded, got ", options_.keep_models);
  options_.placement.validate();
  const std::vector<Device> devices =
      options_.devices.empty() ? std::vector<Device>{options_.placement.device} : options_.devices;
  HD_CHECK(devices.size() <= 64, "at most 64 devices, not ", devices.size());
  std::set<int> gpus;
  for (const Device& d : devices) {
    HD_CHECK(d.type == options_.placement.device.type, "device ", d.to_string(), " is not a ",
             options_.placement.device.is_cpu() ? "cpu" : options_.placement.device.to_string(),
             " device: the engine's devices are of one kind");
    // Two workers on one GPU would capture their UNet graphs on one stream at once.
    HD_CHECK_KIND(d.is_cpu() || gpus.insert(d.index).second, ErrorKind::kUnsupported, "device ", d.to_string(),
                  " is named twice: each GPU takes one worker");
  }
  current_model_ = options_.catalogue.first().name;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto w = std::make_unique<Worker>();
    w->index = int(i);
    w->placement = ops::Placement{devices[i], options_.placement.dtype};
    w->placement.validate();
    workers_.push_back(std::move(w));
  }
  try {
    for (auto& w : workers_) w->thread = std::thread([this, worker = w.get()] { work(*worker); });
  } catch (...) {  // no thread for a worker (the system's limit): the started ones end, then the error
    stop();
    throw;
  }
}

Engine::~Engine() {
  stop();
}

std::vector<Device> Engine::devices() const {
  std::vector<Device> out;
  for (const auto& w : workers_) out.push_back(w->placement.device);
  return out;
}

std::shared_ptr<Job> Engine::submit(JobRequest request) {
  validate(request.params, 8);  // the model's own rules (its scale factor, SDXL's) when the job starts
  std::string wanted = request.model.empty() ? "" : options_.catalogue.find(request.model).name;
  std::string refiner = request.refiner.empty() ? "" : options_.catalogue.find(request.refiner).name;
  if (!refiner.empty()) check_refiner_switch(request.refiner_switch_at);
  std::vector<LoraChoice> loras;
  std::string tags;
  for (const LoraRequest& l : request.loras) {
    HD_CHECK(std::isfinite(l.scale) && std::isfinite(l.unet_scale.value_or(0.0f)), "LoRA ", l.name,
             ": the scale must be a finite number");
    const LoraEntry& entry = options_.loras.find(l.name);
    // Against the model the job will run on as far as a submit knows: its own, or the current one (a
    // select_model before the job starts changes that, and the load then finds a LoRA that does not fit).
    lora_fits_.check(options_.catalogue.find(wanted.empty() ? current_model() : wanted), entry);
    loras.push_back({entry.path, l.scale, l.unet_scale});
    tags += " " + lora_tag(loras.back());
  }
  std::lock_guard lock(mutex_);
  HD_CHECK_KIND(!stopping_, ErrorKind::kBusy, "the server is stopping and takes no new generations");
  drop_cancelled_locked();
  HD_CHECK_KIND(queue_.size() < options_.max_queue, ErrorKind::kBusy, "the queue is full (",
                options_.max_queue, " generations waiting); try again later");
  auto job = std::shared_ptr<Job>(new Job(next_id_++, std::move(request), std::move(wanted),
                                          std::move(refiner), std::move(loras), std::move(tags)));
  queue_.push_back(job);
  wake_.notify_all();
  return job;
}

void Engine::select_model(const std::string& name) {
  const std::string chosen = options_.catalogue.find(name).name;
  std::unique_lock lock(mutex_);
  HD_CHECK_KIND(!stopping_, ErrorKind::kBusy, "the server is stopping");
  // Already the current model, loaded everywhere (clients post it before their requests): nothing to wait for.
  const bool settled = std::all_of(workers_.begin(), workers_.end(), [&](const auto& w) {
    // A worker running the model with LoRAs has it too: a select before each LoRA request (as clients
    // post one) must not load the plain model over it each time.
    return w->loaded_model == chosen && !select_pending_locked(*w);
  });
  if (chosen == current_model_ && settled) return;
  const std::string before = current_model_;
  current_model_ = chosen;
  const uint64_t generation = ++select_generation_;
  const auto everywhere = [&] {
    return std::all_of(workers_.begin(), workers_.end(),
                       [&](const auto& w) { return w->loaded_generation >= generation; });
  };
  wake_.notify_all();
  model_changed_.wait(lock, [&] { return everywhere() || stopping_; });
  HD_CHECK_KIND(everywhere(), ErrorKind::kBusy, "the server stopped before loading ", chosen);
  if (select_error_generation_ == generation && select_error_) {
    // It did not load: jobs that name no model go on with the one they had, unless a later select came.
    if (select_generation_ == generation) current_model_ = before;
    std::rethrow_exception(select_error_);
  }
}

std::string Engine::current_model() const {
  std::lock_guard lock(mutex_);
  return current_model_;
}

Engine::Status Engine::status() const {
  std::lock_guard lock(mutex_);
  // Cancelled jobs still in the queue have ended (Job::cancel), and leave it at the next submit or turn.
  const auto cancelled = size_t(
      std::count_if(queue_.begin(), queue_.end(), [](const auto& job) { return job->cancel_requested(); }));
  Status s;
  s.queued = queue_.size() - cancelled;
  s.finished = finished_ + cancelled;
  s.unet_calls = unet_calls_;
  s.unet_rows = unet_rows_;
  s.model_loads = model_loads_;
  for (const auto& w : workers_) {
    s.running.insert(s.running.end(), w->running.begin(), w->running.end());
    s.loaded.push_back(w->loaded_name);
    s.held.push_back(w->held_names);
    s.held_bytes.push_back(w->held_bytes);
  }
  // In the order they started, across the workers (A1111's skip takes the first).
  std::sort(s.running.begin(), s.running.end(), [](const auto& a, const auto& b) { return a->id() < b->id(); });
  return s;
}

void Engine::cancel_all() {
  std::lock_guard lock(mutex_);
  for (const auto& job : queue_) job->cancel();
  drop_cancelled_locked();
  for (const auto& w : workers_)
    for (const auto& job : w->running) job->cancel();
  wake_.notify_all();
}

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  model_changed_.notify_all();
  std::call_once(joined_, [this] {
    for (auto& w : workers_)
      if (w->thread.joinable()) w->thread.join();
  });
}

// ---- Engine: the workers ----

void Engine::end(const std::shared_ptr<Job>& job, JobState state, std::exception_ptr error) {
  job->run_.reset();
  job->generator_.reset();
  job->shares_.reset();
  {
    std::lock_guard lock(mutex_);  // counted before its waiters wake, so that they see it counted
    ++finished_;
  }
  job->end(state, std::move(error));
}

void Engine::work(Worker& w) {
  std::vector<std::shared_ptr<Job>> active;
  for (;;) {
    std::vector<std::shared_ptr<Job>> admitted;
    try {
      if (!iterate(w, active, admitted)) return;
    } catch (...) {  // the worker's own bookkeeping failed (out of memory): its jobs fail, it goes on
      const std::exception_ptr error = std::current_exception();
      for (const auto& job : admitted)
        if (!job->run_) end(job, JobState::kFailed, error);  // not started, or started and failed already
      for (const auto& job : active) end(job, JobState::kFailed, error);
      active.clear();
      std::lock_guard lock(mutex_);
      w.running.clear();
    }
  }
}

bool Engine::iterate(Worker& w, std::vector<std::shared_ptr<Job>>& active,
                     std::vector<std::shared_ptr<Job>>& admitted) {
  std::optional<std::pair<std::string, uint64_t>> to_select;  // (model, select generation)
  {
    std::unique_lock lock(mutex_);
    // Queued jobs wake an idle worker only when it may admit them (no model change pending anywhere).
    wake_.wait(lock, [&] {
      return !active.empty() || stopping_ || select_pending_locked(w) ||
             (!queue_.empty() && !select_pending_anywhere_locked());
    });
    // A model change waits for the running jobs of the last one, and goes before the queued jobs.
    if (active.empty() && select_pending_locked(w)) {
      to_select.emplace(current_model_, select_generation_);
    } else {
      admitted = admit_locked(w, active);
    }
    if (stopping_ && !to_select && active.empty() && admitted.empty() && queue_.empty()) return false;
    // Nothing to admit for this worker (another took the queue's jobs): wait again rather than spin.
    if (!to_select && active.empty() && admitted.empty()) return true;
  }
  if (to_select) {
    std::exception_ptr error;
    try {
      model(w, plain(to_select->first));
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    w.loaded_generation = to_select->second;
    if (error && select_error_generation_ != to_select->second) {
      select_error_ = error;
      select_error_generation_ = to_select->second;
    }
    model_changed_.notify_all();
    wake_.notify_all();  // the other workers may admit again once every worker has carried the change out
    return true;
  }
  if (!admitted.empty()) {
    try {  // once for all admitted jobs: they share one model and refiner (admit_locked)
      const std::string& refiner = admitted.front()->refiner_name();
      const Job& first = *admitted.front();
      model(w, {first.model_name(), first.loras_, first.model_key_}, refiner);
      if (!refiner.empty()) refiner_model(w, refiner);
    } catch (...) {
      for (const auto& job : admitted) end(job, JobState::kFailed, std::current_exception());
      admitted.clear();
    }
  }
  for (const auto& job : admitted) {
    start(w, job);
    if (job->run_) active.push_back(job);
  }
  if (!active.empty()) step_all(w, active);
  std::lock_guard lock(mutex_);
  w.running = active;
  if (active.empty()) wake_.notify_all();  // idle now: a busy worker may have left it a job
  return true;
}

bool Engine::lighter_worker_locked(const Worker& w, int64_t rows, const std::string& model,
                                   const std::string& refiner) const {
  return std::any_of(workers_.begin(), workers_.end(), [&](const auto& o) {
    // Only a worker that would take the job: idle, or running jobs of its model and refiner (admit_locked's
    // rule).
    if (o.get() == &w || select_pending_locked(*o)) return false;
    if (!o->running.empty() &&
        (o->running.front()->model_key_ != model || o->running.front()->wanted_refiner_ != refiner))
      return false;
    int64_t load = 0;
    for (const auto& job : o->running) load += unet_rows(job->request_.params);
    return load < rows;
  });
}

bool Engine::select_pending_anywhere_locked() const {
  return std::any_of(workers_.begin(), workers_.end(), [&](const auto& w) { return select_pending_locked(*w); });
}

void Engine::drop_cancelled_locked() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    Job& job = **it;
    if (!job.cancel_requested()) {
      ++it;
      continue;
    }
    job.end_if_queued();  // nothing when its cancel() has ended it already
    ++finished_;
    it = queue_.erase(it);
  }
}

std::vector<std::shared_ptr<Job>> Engine::admit_locked(Worker& w, const std::vector<std::shared_ptr<Job>>& active) {
  drop_cancelled_locked();
  std::vector<std::shared_ptr<Job>> admitted;
  // The running jobs finish first, then the model changes; no worker starts jobs until every worker has
  // carried the change out (or failed to: select_model then puts the last model back).
  if (select_pending_anywhere_locked()) return admitted;
  int64_t rows = 0;
  for (const auto& job : active) rows += job->run_->rows();
  std::string model = active.empty() ? "" : active.front()->model_key_;  // with its LoRAs
  std::string refiner = active.empty() ? "" : active.front()->wanted_refiner_;
  while (!queue_.empty()) {
    const std::shared_ptr<Job>& job = queue_.front();
    const std::string name = job->wanted_model_.empty() ? current_model_ : job->wanted_model_;
    const std::string key = name + job->lora_tags_;
    const int64_t job_rows = unet_rows(job->request_.params);
    // In order: a job of another model, or of another refiner (a worker holds one beside its model),
    // waits until the running ones finish, and those behind it too.
    if (!model.empty() && (key != model || job->wanted_refiner_ != refiner)) break;
    const bool alone = active.empty() && admitted.empty();  // a job that would run alone always starts
    // Joining a batch: only within the limits, and not while another device has less to do (it takes
    // the job at its next turn: the devices' loads stay even).
    if (!alone && (!options_.batch_across_jobs || rows + job_rows > options_.max_batch_rows ||
                   lighter_worker_locked(w, rows, key, job->wanted_refiner_)))
      break;
    bool taken = false;
    {
      std::lock_guard job_lock(job->mutex_);
      if (!job->ended_locked()) {  // not cancelled since drop_cancelled_locked above
        job->model_name_ = name;
        job->model_key_ = key;
        job->worker_ = w.index;
        taken = true;
      }
    }
    if (!taken) {
      ++finished_;
      queue_.pop_front();
      continue;
    }
    model = key;
    refiner = job->wanted_refiner_;
    rows += job_rows;
    admitted.push_back(job);
    w.running.push_back(job);  // from now on status() and cancel_all() see it, while it starts too
    queue_.pop_front();
  }
  return admitted;
}

std::unique_ptr<StableDiffusion> Engine::load(const Worker& w, const ModelChoice& choice,
                                              const char* role) const {
  const CatalogueEntry& entry = options_.catalogue.find(choice.name);
  return std::make_unique<StableDiffusion>(with_context(
      [&] {
        return options_.loader
                   ? options_.loader(entry, w.placement, choice.loras)
                   : StableDiffusion::load(entry.path, std::nullopt, std::nullopt, w.placement, choice.loras);
      },
      [&] {
        return workers_.size() == 1 ? str_cat("while loading the ", role, " ", entry.name)
                                    : str_cat("while loading the ", role, " ", entry.name, " on ",
                                              w.placement.device.to_string());
      }));
}

StableDiffusion* Engine::find_held(const Worker& w, const std::string& name) {
  for (const HeldModel& h : w.held)
    if (h.name == name) return h.model.get();
  return nullptr;
}

size_t Engine::weight_bytes(const Worker& w, const std::string& name) const {
  const CatalogueEntry& entry = options_.catalogue.find(name);
  const int64_t elements = with_context(
      [&] {
        const ModelSource source = ModelSource::open(entry.path);
        int64_t n = source.weight_elements();
        if (!w.placement.device.is_cpu())
          for (const ModelComponent& c : source.components()) n += gpu_extra_weight_elements(c);
        return n;
      },
      [&] { return str_cat("while sizing the model ", entry.name); });
  return size_t(elements) * dtype_size(w.placement.dtype);
}

const StableDiffusion& Engine::hold(Worker& w, const ModelChoice& choice, const char* role,
                                    const std::string& beside) {
  const std::string& name = choice.key;
  const auto publish = [&] {  // held_names, most recently used first, and held_bytes
    std::vector<const HeldModel*> order;
    size_t bytes = 0;
    for (const HeldModel& h : w.held) order.push_back(&h), bytes += h.bytes;
    std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->last_used > b->last_used; });
    std::lock_guard lock(mutex_);
    w.held_names.clear();
    for (const HeldModel* h : order) w.held_names.push_back(h->name);
    w.held_bytes = bytes;
  };
  for (HeldModel& h : w.held) {
    if (h.name != name) continue;
    h.last_used = ++w.uses;
    publish();
    return *h.model;
  }
  // Drops the least recently used model that the batch does not need while `too_many` says so (or until
  // none may go).
  const auto drop_while = [&](auto too_many) {
    for (;;) {
      size_t oldest = w.held.size();
      for (size_t i = 0; i < w.held.size(); ++i)
        if (w.held[i].name != beside && (oldest == w.held.size() || w.held[i].last_used < w.held[oldest].last_used))
          oldest = i;
      if (!too_many() || oldest == w.held.size()) break;
      w.held.erase(w.held.begin() + std::ptrdiff_t(oldest));
    }
    publish();
  };
  // Their memory is what the next one needs: past keep_models - 1 others, or past model_memory with it.
  const size_t bytes = options_.model_memory > 0 ? weight_bytes(w, choice.name) : 0;
  drop_while([&] {
    size_t held_bytes = 0;
    for (const HeldModel& h : w.held) held_bytes += h.bytes;
    return w.held.size() > size_t(options_.keep_models) - 1 ||
           (options_.model_memory > 0 && held_bytes + bytes > options_.model_memory);
  });
  const auto others = [&] {
    return std::any_of(w.held.begin(), w.held.end(), [&](const auto& h) { return h.name != beside; });
  };
  std::unique_ptr<StableDiffusion> loaded;
  try {
    loaded = load(w, choice, role);
  } catch (const Error& e) {  // device or host memory (core's buffers say kOutOfMemory for both)
    if (e.kind() != ErrorKind::kOutOfMemory || !others()) throw;
  } catch (const std::bad_alloc&) {
    if (!others()) throw;
  }
  if (!loaded) {
    drop_while([] { return true; });  // the kept models took the room: only the batch's own stay
    loaded = load(w, choice, role);
  }
  w.held.push_back({name, std::move(loaded), ++w.uses, bytes});
  {
    std::lock_guard lock(mutex_);
    ++model_loads_;
  }
  publish();
  return *w.held.back().model;
}

const StableDiffusion& Engine::model(Worker& w, const ModelChoice& choice, const std::string& refiner) {
  const std::string& name = choice.key;
  if (name != w.loaded_name) {  // (written by this worker's thread only)
    std::lock_guard lock(mutex_);
    w.loaded_name.clear();  // until it is held
    w.loaded_model.clear();
  }
  const StableDiffusion& sd = hold(w, choice, "model", refiner);
  std::lock_guard lock(mutex_);
  w.loaded_name = name;
  w.loaded_model = choice.name;
  return sd;
}

const StableDiffusion& Engine::refiner_model(Worker& w, const std::string& name) {
  return hold(w, plain(name), name == w.loaded_name ? "model" : "refiner", w.loaded_name);
}

const StableDiffusion& Engine::stepping_model(const Worker& w, const Job& job) const {
  const StableDiffusion* sd = find_held(w, job.refining_ ? job.wanted_refiner_ : w.loaded_name);
  HD_CHECK_KIND(sd != nullptr, ErrorKind::kRuntime, "the worker dropped the model of a running job");
  return *sd;
}

bool Engine::hand_over(Worker& w, const std::shared_ptr<Job>& job) {
  try {
    const OwnedTensor handed = job->run_->take_latents(&job->times_);
    const StableDiffusion& refiner = refiner_model(w, job->wanted_refiner_);
    job->run_.emplace(refiner.start_denoising(job->shares_->refiner, *job->generator_,
                                              DenoiseStart{nullptr, &handed.view(), {}}));
    job->refining_ = true;
    return true;
  } catch (...) {
    end(job, JobState::kFailed, std::current_exception());
    return false;
  }
}

void Engine::start(Worker& w, const std::shared_ptr<Job>& job) {
  if (job->cancel_requested()) return end(job, JobState::kCancelled, cancelled_error());
  try {
    const StableDiffusion& sd = stepping_model(w, *job);  // the job's model (iterate loaded it)
    {
      std::lock_guard lock(job->mutex_);
      job->state_ = JobState::kRunning;
      job->started_ = std::chrono::steady_clock::now();
    }
    const GenerationParams& p = job->request_.params;
    const Tensor* init = job->request_.init_image ? &job->request_.init_image->view() : nullptr;
    if (!job->wanted_refiner_.empty())  // every check of both shares before the first step
      job->shares_ = refiner_shares(sd, refiner_model(w, job->wanted_refiner_), p,
                                    job->request_.refiner_switch_at, init != nullptr);
    job->generator_ = std::make_unique<TorchCpuGenerator>(p.seed);
    // An img2img that starts below the refiner's switch is the refiner's alone (refiner_shares).
    job->refining_ = job->shares_ && job->shares_->base_steps == 0;
    const StableDiffusion& first = job->refining_ ? refiner_model(w, job->wanted_refiner_) : sd;
    job->run_.emplace(first.start_denoising(job->shares_ && !job->refining_ ? job->shares_->base
                                            : job->shares_                  ? job->shares_->refiner
                                                                            : p,
                                            *job->generator_, DenoiseStart{init, nullptr, {}}));
    job->steps_total_ =
        job->shares_ ? job->shares_->base_steps + job->shares_->refiner_steps : job->run_->steps_total();
  } catch (...) {
    end(job, JobState::kFailed, std::current_exception());
  }
}

void Engine::step_all(Worker& w, std::vector<std::shared_ptr<Job>>& active) {
  std::erase_if(active, [&](const std::shared_ptr<Job>& job) {
    if (!job->cancel_requested()) return false;
    end(job, JobState::kCancelled, cancelled_error());
    return true;
  });
  // One UNet batch per group of runs that can share one (the same size and context length).
  std::vector<bool> grouped(active.size(), false);
  for (size_t i = 0; i < active.size(); ++i) {
    if (grouped[i]) continue;
    std::vector<std::shared_ptr<Job>> group;
    std::vector<DenoisingRun*> runs;
    for (size_t j = i; j < active.size(); ++j) {
      if (grouped[j] || !active[j]->run_->batches_with(*active[i]->run_)) continue;
      grouped[j] = true;
      group.push_back(active[j]);
      runs.push_back(&*active[j]->run_);
    }
    try {  // runs batch only on one model (batches_with): the group's first job's
      stepping_model(w, *group.front()).step(runs);
    } catch (...) {
      for (const auto& job : group) end(job, JobState::kFailed, std::current_exception());
      continue;
    }
    int64_t rows = 0;
    for (const auto& job : group) {
      job->steps_done_ = (job->refining_ ? job->shares_->base_steps : 0) + job->run_->steps_done();
      rows += job->run_->rows();
    }
    std::lock_guard lock(mutex_);
    ++unet_calls_;
    unet_rows_ += uint64_t(rows);
  }
  std::erase_if(active, [&](const std::shared_ptr<Job>& job) {
    if (!job->run_) return true;  // failed above
    if (!job->run_->done()) return false;
    if (job->shares_ && !job->refining_) return !hand_over(w, job);  // the refiner's share next
    finish(w, job);
    return true;
  });
}

void Engine::finish(Worker& w, const std::shared_ptr<Job>& job) {
  try {
    OwnedTensor latents = job->run_->take_latents(&job->times_);
    // With a refiner, the refiner's VAE decodes (generate_with_refiner).
    const GenerationParams& p = job->refining_ ? job->shares_->refiner : job->request_.params;
    GenerationResult result =
        stepping_model(w, *job).finish(p, std::move(latents), std::move(job->times_), *job->started_);
    {
      std::lock_guard lock(job->mutex_);
      job->result_ = std::move(result);
    }
    end(job, JobState::kDone);
  } catch (...) {
    end(job, JobState::kFailed, std::current_exception());
  }
}

}  // namespace hd::serve
