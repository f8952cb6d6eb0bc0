#include "serve/engine.h"

#include <algorithm>

#include "core/error.h"

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
  options_.placement.validate();
  current_model_ = options_.catalogue.first().name;
  worker_ = std::thread([this] { work(); });
}

Engine::~Engine() {
  stop();
}

std::shared_ptr<Job> Engine::submit(JobRequest request) {
  validate(request.params, 8);  // the model's own rules (its scale factor, SDXL's) when the job starts
  std::string wanted = request.model.empty() ? "" : options_.catalogue.find(request.model).name;
  std::lock_guard lock(mutex_);
  HD_CHECK_KIND(!stopping_, ErrorKind::kBusy, "the server is stopping and takes no new generations");
  HD_CHECK_KIND(queue_.size() < options_.max_queue, ErrorKind::kBusy, "the queue is full (",
                options_.max_queue, " generations waiting); try again later");
  auto job = std::shared_ptr<Job>(new Job(next_id_++, std::move(request), std::move(wanted)));
  queue_.push_back(job);
  wake_.notify_all();
  return job;
}

void Engine::select_model(const std::string& name) {
  const std::string chosen = options_.catalogue.find(name).name;
  std::unique_lock lock(mutex_);
  HD_CHECK_KIND(!stopping_, ErrorKind::kBusy, "the server is stopping");
  // Already the current and loaded model (clients post it before their requests): nothing to wait for.
  if (chosen == current_model_ && chosen == loaded_name_ && !select_pending_locked()) return;
  const std::string before = current_model_;
  current_model_ = chosen;
  const uint64_t generation = ++select_generation_;
  wake_.notify_all();
  model_changed_.wait(lock, [&] { return loaded_generation_ >= generation || stopping_; });
  HD_CHECK_KIND(loaded_generation_ >= generation, ErrorKind::kBusy, "the server stopped before loading ",
                chosen);
  if (loaded_generation_ == generation && select_error_) {
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
  return Status{queue_.size(), running_, finished_, unet_calls_, unet_rows_};
}

void Engine::cancel_all() {
  std::lock_guard lock(mutex_);
  for (const auto& job : queue_) job->cancel();
  for (const auto& job : running_) job->cancel();
  wake_.notify_all();
}

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  model_changed_.notify_all();
  std::call_once(joined_, [this] { worker_.join(); });
}

// ---- Engine: the worker ----

void Engine::end(const std::shared_ptr<Job>& job, JobState state, std::exception_ptr error) {
  job->run_.reset();
  job->generator_.reset();
  {
    std::lock_guard lock(mutex_);  // counted before its waiters wake, so that they see it counted
    ++finished_;
  }
  job->end(state, std::move(error));
}

void Engine::work() {
  std::vector<std::shared_ptr<Job>> active;
  for (;;) {
    std::vector<std::shared_ptr<Job>> admitted;
    try {
      if (!iterate(active, admitted)) return;
    } catch (...) {  // the worker's own bookkeeping failed (out of memory): its jobs fail, it goes on
      const std::exception_ptr error = std::current_exception();
      for (const auto& job : admitted)
        if (!job->run_) end(job, JobState::kFailed, error);  // not started, or started and failed already
      for (const auto& job : active) end(job, JobState::kFailed, error);
      active.clear();
      std::lock_guard lock(mutex_);
      running_.clear();
    }
  }
}

bool Engine::iterate(std::vector<std::shared_ptr<Job>>& active, std::vector<std::shared_ptr<Job>>& admitted) {
  std::optional<std::pair<std::string, uint64_t>> to_select;  // (model, select generation)
  {
    std::unique_lock lock(mutex_);
    wake_.wait(lock,
               [&] { return !active.empty() || !queue_.empty() || stopping_ || select_pending_locked(); });
    // A model change waits for the running jobs of the last one, and goes before the queued jobs.
    if (active.empty() && select_pending_locked()) {
      to_select.emplace(current_model_, select_generation_);
    } else {
      admitted = admit_locked(active);
    }
    if (stopping_ && !to_select && active.empty() && admitted.empty() && queue_.empty()) return false;
  }
  if (to_select) {
    std::exception_ptr error;
    try {
      model(to_select->first);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    loaded_generation_ = to_select->second;
    select_error_ = error;
    model_changed_.notify_all();
    return true;
  }
  if (!admitted.empty()) {
    try {  // once for all admitted jobs: they share one model (admit_locked)
      model(admitted.front()->model_name());
    } catch (...) {
      for (const auto& job : admitted) end(job, JobState::kFailed, std::current_exception());
      admitted.clear();
    }
  }
  for (const auto& job : admitted) {
    start(job);
    if (job->run_) active.push_back(job);
  }
  if (!active.empty()) step_all(active);
  std::lock_guard lock(mutex_);
  running_ = active;
  return true;
}

std::vector<std::shared_ptr<Job>> Engine::admit_locked(const std::vector<std::shared_ptr<Job>>& active) {
  // Cancelled jobs leave the queue here, unstarted.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!(*it)->cancel_requested()) {
      ++it;
      continue;
    }
    ++finished_;
    (*it)->end(JobState::kCancelled, cancelled_error());
    it = queue_.erase(it);
  }
  std::vector<std::shared_ptr<Job>> admitted;
  if (select_pending_locked()) return admitted;  // the running jobs finish first, then the model changes
  int64_t rows = 0;
  for (const auto& job : active) rows += job->run_->rows();
  std::string model = active.empty() ? "" : active.front()->model_name();
  while (!queue_.empty()) {
    const std::shared_ptr<Job>& job = queue_.front();
    const std::string name = job->wanted_model_.empty() ? current_model_ : job->wanted_model_;
    const int64_t job_rows = unet_rows(job->request_.params);
    // In order: a job of another model waits until the running ones finish, and those behind it too.
    if (!model.empty() && name != model) break;
    const bool alone = active.empty() && admitted.empty();  // a job that would run alone always starts
    if (!alone && (!options_.batch_across_jobs || rows + job_rows > options_.max_batch_rows)) break;
    {
      std::lock_guard job_lock(job->mutex_);
      job->model_name_ = name;
    }
    model = name;
    rows += job_rows;
    admitted.push_back(job);
    running_.push_back(job);  // from now on status() and cancel_all() see it, while it starts too
    queue_.pop_front();
  }
  return admitted;
}

const StableDiffusion& Engine::model(const std::string& name) {
  if (loaded_ && loaded_name_ == name) return *loaded_;
  // The last model goes first: its memory is what the next one needs.
  loaded_.reset();
  {
    std::lock_guard lock(mutex_);
    loaded_name_.clear();
  }
  const CatalogueEntry& entry = options_.catalogue.find(name);
  loaded_ = std::make_unique<StableDiffusion>(with_context(
      [&] { return StableDiffusion::load(entry.path, std::nullopt, std::nullopt, options_.placement); },
      [&] { return str_cat("while loading the model ", entry.name); }));
  std::lock_guard lock(mutex_);
  loaded_name_ = name;
  return *loaded_;
}

void Engine::start(const std::shared_ptr<Job>& job) {
  if (job->cancel_requested()) return end(job, JobState::kCancelled, cancelled_error());
  try {
    const StableDiffusion& sd = *loaded_;  // the job's model (Engine::work loaded it)
    {
      std::lock_guard lock(job->mutex_);
      job->state_ = JobState::kRunning;
      job->started_ = std::chrono::steady_clock::now();
    }
    const GenerationParams& p = job->request_.params;
    job->generator_ = std::make_unique<TorchCpuGenerator>(p.seed);
    const Tensor* init = job->request_.init_image ? &job->request_.init_image->view() : nullptr;
    job->run_.emplace(sd.start_denoising(p, *job->generator_, DenoiseStart{init, nullptr}));
    job->steps_total_ = job->run_->steps_total();
  } catch (...) {
    end(job, JobState::kFailed, std::current_exception());
  }
}

void Engine::step_all(std::vector<std::shared_ptr<Job>>& active) {
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
    try {
      loaded_->step(runs);
    } catch (...) {
      for (const auto& job : group) end(job, JobState::kFailed, std::current_exception());
      continue;
    }
    int64_t rows = 0;
    for (const auto& job : group) {
      job->steps_done_ = job->run_->steps_done();
      rows += job->run_->rows();
    }
    std::lock_guard lock(mutex_);
    ++unet_calls_;
    unet_rows_ += uint64_t(rows);
  }
  std::erase_if(active, [&](const std::shared_ptr<Job>& job) {
    if (!job->run_) return true;  // failed above
    if (!job->run_->done()) return false;
    finish(job);
    return true;
  });
}

void Engine::finish(const std::shared_ptr<Job>& job) {
  try {
    StageTimes times;
    OwnedTensor latents = job->run_->take_latents(&times);
    GenerationResult result =
        loaded_->finish(job->request_.params, std::move(latents), std::move(times), *job->started_);
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
