// hipdiffusion: the command-line front end. Parses the subcommand and maps failures to exit codes;
// the work is done by the subcommands and the library below them.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/startup_trace.h"
#include "tools/cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: hipdiffusion <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  info PATH     describe a model: a .safetensors checkpoint or a diffusers folder\n"
    "  generate --prompt TEXT [--model PATH] [--negative-prompt TEXT] [--steps N] [--cfg-scale X]\n"
    "           [--sampler euler|euler_a|ddim|dpmpp_2m] [--schedule discrete|karras] [--seed N]\n"
    "           [--width W] [--height H] [--batch N] [--init-image PNG --strength S]\n"
    "           [--vocab DIR] [--config DIR] [--prediction epsilon|v_prediction]\n"
    "           [--output PNG] [--save-latents PATH] [--threads N] [--vae-tiling | --vae-tiling-blended]\n"
    "           [--device cpu|cuda:N|hip:N] [--dtype f32|f16|bf16] [--tune quick|exhaustive]\n"
    "           [--tune-cache PATH] [--max-device-memory GIB] [--kernels own|fragments|all] "
    "[--timestep-spacing S]\n"
    "           [--vae PATH] [--refiner PATH [--high-noise-frac F]] [SDXL's size and aesthetic flags]\n"
    "           [--lora FILE[:SCALE[:UNET_SCALE]][,...]]\n"
    "           [--devices cuda:0,cuda:1,...|all [--parallel auto|data|cfg|split|displaced]\n"
    "            [--displaced-warmup N]]\n"
    "                make an image from a diffusers folder or a single .safetensors, on the CPU\n"
    "                (f32) or a GPU (f16 by default; kernel choices cached in --tune-cache,\n"
    "                default ~/.cache/hipdiffusion/tuning.tsv; a new shape's first use times a\n"
    "                few likely kernels briefly, --tune exhaustive: all of them fully; or HD_TUNE);\n"
    "                without --model, the built-in shapes model (models/shapes-tiny); the size\n"
    "                defaults to the one the model was trained for; the VAE decodes in tiles\n"
    "                when the image does not fit in device memory at once (--vae-tiling: always;\n"
    "                the tiles give the whole decode's picture; --vae-tiling-blended: diffusers'\n"
    "                enable_tiling, tiles normalised each on its own); --max-device-memory: at\n"
    "                most that much device memory held at once; --kernels own: the\n"
    "                project's own GPU kernels only, no cuDNN/cuBLASLt/hipBLASLt/rocBLAS/MIOpen;\n"
    "                fragments: ours without Hopper's warpgroup kernels, as GPUs before Hopper run\n"
    "                (default all; or set HD_KERNELS)\n"
    "                --lora: LoRA files (kohya's or diffusers' form) merged into the\n"
    "                text encoders' and the UNet's weights as they load, each at SCALE (1;\n"
    "                the UNet at UNET_SCALE when given)\n"
    "  bench (--model PATH | --arch sd15|sd21|sdxl) [--device cpu|cuda:N|hip:N] [--dtype f16|bf16]\n"
    "           [--steps N] [--repeats N] [--width W] [--height H] [--sampler NAME] [--cfg-scale X]\n"
    "           [--vocab DIR] [--config DIR] [--tune quick|exhaustive] [--tune-cache PATH]\n"
    "           [--vae-tiling[-blended]] [--max-device-memory GIB] [--kernels own|fragments|all] "
    "[--profile]\n"
    "           [--json]\n"
    "                time loading, a whole generation and its stages (text encoding, UNet step,\n"
    "                denoising loop, VAE decode, the PNG generate writes; medians of --repeats, 5,\n"
    "                after one warm-up, whose time and tuning are shown too) and the peak device\n"
    "                memory; --arch: random\n"
    "                weights of that architecture (30 steps, 512x512); --profile: then the time\n"
    "                of each op over one more generation\n"
    "  tune --model PATH [--size WxH[,WxH...]] [--batch N] [--cfg-scale X] [--device cuda:N|hip:N]\n"
    "           [--dtype f16|bf16] [--tune-cache PATH] [--kernels own|fragments|all] [--vocab DIR] [--config "
    "DIR]\n"
    "           [--max-device-memory GIB]\n"
    "                fill the tuning cache ahead of time: every candidate kernel timed fully for\n"
    "                each shape a generation of that size and batch computes (default size: the\n"
    "                model's own; CFG above 1 doubles the UNet's batch, as generate does)\n"
    "  serve [--model PATH] [--models-dir DIR] [--host 127.0.0.1] [--port 7860] [--api-auth USER:PASS,...]\n"
    "           [--device cpu|cuda:N|hip:N | --devices cuda:0,cuda:1,...|all] [--dtype f16|bf16]\n"
    "           [--max-queue N] [--max-batch-rows N] [--no-batching] [--keep-models N] [--model-memory GIB]\n"
    "           [--lora-dir DIR]\n"
    "           [--max-body-mb N] [--max-pixels N] [--max-steps N] [--max-images N]\n"
    "           [--tune quick|exhaustive] [--tune-cache PATH] [--kernels own|fragments|all] "
    "[--max-device-memory GIB]\n"
    "                AUTOMATIC1111's API (/sdapi/v1/txt2img, img2img, progress, interrupt, sd-models,\n"
    "                options, samplers, schedulers; /openapi.json) on one engine that keeps its\n"
    "                models loaded (--keep-models: how many per device, default 1; --model-memory:\n"
    "                at most this many GiB of their weights per device) and runs the\n"
    "                requests' steps together in one UNet batch; models\n"
    "                only from --model and --models-dir (default: the built-in one); loopback\n"
    "                unless --host says otherwise; SIGTERM finishes the accepted generations\n"
    "  tokenize --model PATH --prompt TEXT [--vocab DIR]\n"
    "                print the 77 CLIP token ids of a prompt\n"
    "  --version     print the version\n"
    "  --help        print this help\n";

int dispatch(std::span<const std::string_view> args) {
  if (args.empty()) throw hd::cli::UsageError{"missing command"};
  const std::string_view command = args[0];
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return hd::cli::kExitOk;
  }
  if (command == "--version") {
    std::printf("hipdiffusion %s\n", HD_VERSION);
    return hd::cli::kExitOk;
  }
  if (command == "info") return hd::cli::run_info(args.subspan(1));
  if (command == "tokenize") return hd::cli::run_tokenize(args.subspan(1));
  if (command == "generate") return hd::cli::run_generate(args.subspan(1));
  if (command == "bench") return hd::cli::run_bench(args.subspan(1));
  if (command == "tune") return hd::cli::run_tune(args.subspan(1));
  if (command == "serve") return hd::cli::run_serve(args.subspan(1));
  throw hd::cli::UsageError{"unknown command '" + std::string(command) + "'"};
}

// The end of a command that succeeded: its output flushed, then the process ends without running
// destructors and exit handlers. What they would release (device memory, the GPU context, gigabytes of
// host weights) the system reclaims anyway, and releasing it one piece at a time took 0.2 s of a 1.8 s
// `generate` on the H100 machine. Sanitizer builds exit normally, so that the leak checker runs.
int finish(int code) {
  const bool flushed = std::fflush(stdout) == 0 && std::fflush(stderr) == 0;
  if (!flushed) {
    std::fprintf(stderr, "hipdiffusion: error: cannot write the output\n");
    code = hd::cli::kExitFailure;
  }
#if !defined(__SANITIZE_ADDRESS__)
  std::_Exit(code);
#endif
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  hd::startup_mark("main");
  std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return finish(dispatch(args));
  } catch (const hd::cli::UsageError& e) {
    std::fprintf(stderr, "hipdiffusion: %s\n\n%s", e.message.c_str(), kUsage);
    return hd::cli::kExitUsage;
  } catch (const hd::Error& e) {
    std::fprintf(stderr, "hipdiffusion: error: %s\n", e.what());
    return hd::cli::kExitFailure;
  } catch (const nlohmann::json::exception& e) {
    // A JSON value of the wrong type in a config or tokenizer file the user gave.
    std::fprintf(stderr, "hipdiffusion: error: a JSON file of the model has a value of the wrong type: %s\n", e.what());
    return hd::cli::kExitFailure;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "hipdiffusion: error: out of host memory\n");
    return hd::cli::kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hipdiffusion: internal error: %s\n", e.what());
    return hd::cli::kExitFailure;
  }
}
