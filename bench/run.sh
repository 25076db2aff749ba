#!/usr/bin/env bash
# bench/run.sh NAME [--quick] [--seeds N [--from-seed K]]: builds if needed, runs one benchmark, writes
# bench/results/NAME.json and prints the headline figures last.
# Every figure here comes from one host; where devices are emulated the
# benchmark says so in its results.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:-}
shift || true
cd "$root"
mkdir -p bench/results
case "$name" in
  build_time)
    # Clean build without ccache in a scratch directory, two jobs.
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    start=$(date +%s.%N)
    CCACHE_DISABLE=1 cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    CCACHE_DISABLE=1 ninja -C "$dir" -j 2 >/dev/null
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    printf '{\n  "benchmark": "build_time",\n  "jobs": 2,\n  "cores": %s,\n  "clean_build_s": %.1f\n}\n' \
      "$(nproc)" "$secs" >bench/results/build_time.json
    echo "results: bench/results/build_time.json"
    printf 'clean_build_s: %.1f\n' "$secs"
    ;;
  fuzz)
    # The libFuzzer harnesses (fuzz/, issue 15 item 4): each decoder 10^6
    # times under ASan + UBSan, `nice -n 10`; exits 77 without clang-14.
    "$root/fuzz/run.sh" "$@"
    ;;
  dashboard)
    # The live page's costs (bench/dashboard.py): /api/state with 32 node
    # processes, the supervisor's CPU with 10 pages, training with it on.
    "$root/deploy/build.sh" "$root/build" >/dev/null
    python3 "$root/bench/dashboard.py" "$root/build/apps/salamander" \
      bench/results/dashboard.json "$@"
    ;;
  soak)
    # Training through failures at a rate (bench/soak.py): --minutes M
    # (default 60), --mean-s S between failures (default 60), --seed N.
    "$root/deploy/build.sh" "$root/build" >/dev/null
    python3 "$root/bench/soak.py" "$root/build/apps/salamander" bench/results/soak.json "$@"
    ;;
  soak_serve)
    # Serving under hey -c 16 through failures at a rate (bench/soak.py
    # --mode serve): --minutes M (default 30), --baseline-minutes B (5).
    "$root/deploy/build.sh" "$root/build" >/dev/null
    python3 "$root/bench/soak.py" "$root/build/apps/salamander" bench/results/soak_serve.json \
      --mode serve "$@"
    ;;
  soak_fed | soak_split)
    # A federated (FedAvg) or split-learning job through failures at a rate,
    # the supervisor killed and resumed too (bench/soak.py --mode federate |
    # split): --minutes M (default 20), --mean-s S, --seed N.
    "$root/deploy/build.sh" "$root/build" >/dev/null
    mode=$([ "$name" = soak_fed ] && echo federate || echo split)
    python3 "$root/bench/soak.py" "$root/build/apps/salamander" "bench/results/$name.json" \
      --mode "$mode" "$@"
    ;;
  "")
    cat >&2 <<'USAGE'
usage: bench/run.sh NAME [--quick] [--seeds N [--from-seed K]]   (results: bench/results/NAME.json)
  build_time               clean build of every target, 2 jobs, no ccache
  training_overhead        one epoch of the CNN through the layered-model path vs plain LibTorch
  codec                    Cap'n Proto tensor frames: encode/decode rates
  pipeline_overhead        a one-stage pipeline (actors, TLS) vs the plain training loop
  bubble                   idle fraction of the schedules (GPipe, 1F1B, async) at 2 and 4 stages
  transfer                 activations over CAF vs raw TCP
  planner_speed            the partitioner's time by devices and layers
  hetero                   10:4:2:1 EMULATED devices: plan vs even, ideal and the best device
  replan_stability         time from a slow-down to the re-plan; re-plans a minute when steady
  recovery                 recovery time after crash, kill -9, hang, supervisor death
  failure_during_recovery  a second failure while recovering
  recovery_large           kill -9 under a 28M-parameter ViT over EMULATED 100 Mbit/s links: recovery against the links' limit
  train_scaling            4 EMULATED devices vs 1 of the same share (pipeline, async, data parallel)
  async_accuracy           the CNN's accuracy after an epoch: async (with and without weight prediction, aggregation) vs 1f1b (--seeds N)
  async_accuracy_vit       a 4-block ViT's accuracy after an epoch: async (with and without weight prediction) vs 1f1b (--seeds N)
  async_accuracy_vit_warmup  the same ViT under a warm-up of the learning rate (--warmup-batches 94): async vs 1f1b (--seeds N)
  scale                    32 EMULATED nodes vs 4: planning time, heartbeats, recovery after a kill -9
  serve                    serving: protocol ratios, latency, 4/8-device speedups, a kill under load
  serve_failure            serving through 8 kill -9s, each on fresh EMULATED devices under a steady rate: the gap without answers, mean and 95% interval
  serve_grpc               gRPC against HTTP on one device (the CNN, 16 rows binary, one C++ client), 20 alternating rounds: mean ratio and 95% interval
  serve_scale              serving at PipeEdge's scale: 16 EMULATED devices vs 1, the plan vs PipeDream's at 10:4:2:1, planning 16 devices of 4 types
  federated                ELFISH vs FedAvg-wait, deadline-drop and the rest: stragglers holding classes of their own, Dir(0.5), mild (--seeds N)
  federated_fedrs          the headline regime of federated with FedRS's restricted softmax (0.5) for every strategy: ELFISH vs deadline-drop and FedAvg-wait (--seeds N)
  federated_aggregation    ELFISH's aggregation against sample weights (same masks) with Dir(0.5) and with mild stragglers (--seeds N)
  federated_niid           FedAvg under NIID-Bench's protocol (Dir(0.5), 10 clients, 50 rounds)
  split                    AdaSplit vs vanilla split learning and SplitFed: bytes, shared and personalised accuracy (--seeds N)
  footprint                node RSS and start-up, idle and with a job
  continual                training from a stream through a node kill
  dashboard                the live page: /api/state with 32 nodes, CPU with 10 pages, training on/off
  soak                     training through a failure a minute (kill -9, SIGSTOP, slow, link cut, supervisor) for an hour
  soak_serve               serving under hey -c 16 through a failure a minute for 30 minutes: requests lost, p99 against fault-free
  soak_fed                 a federated job (1,000 virtual clients, 10% a round) through a failure a minute for 20 minutes: every round completed
  soak_split               a split-learning job (20 virtual clients) through a failure a minute for 20 minutes: every round completed
  fuzz                     the libFuzzer harnesses, 10^6 runs each
USAGE
    exit 2
    ;;
  *)
    "$root/deploy/build.sh" "$root/build" >/dev/null
    SALAMANDER_BIN="$root/build/apps/salamander" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
      "$root/build/bench/salamander_bench" "$name" --out "bench/results/$name.json" "$@"
    # accuracy over the seeds, mean and 95% band (bench/bands.py); the
    # headline figures stay last
    case "$name" in
      federated)
        python3 "$root/bench/bands.py" bench/results/federated.json bench/results/federated.png \
          apart_fedavg apart_deadline apart_elfish apart_elfish_samples dir_deadline \
          dir_elfish >&2 ;;
      split)
        python3 "$root/bench/bands.py" bench/results/split.json bench/results/split.png \
          vanilla_shared splitfed_shared adasplit_shared --xlabel round >&2 ;;
    esac
    ;;
esac
