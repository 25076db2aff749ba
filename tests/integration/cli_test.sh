#!/usr/bin/env bash
# The salamander command as a user meets it. Usage: cli_test.sh PATH/TO/salamander
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../deploy/free_port.sh" # free_port
bin="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" # jobs write runs/ (their metrics logs) under the working directory
fail() { echo "FAIL: $*"; exit 1; }

# help is useful: subcommands and their main options are listed
grep -q "train" <<<"$("$bin" --help)" || fail "--help lists no train"
grep -q -- "--micro-batches" <<<"$("$bin" train --help)" || fail "train --help lists no --micro-batches"
grep -q -- "--load" <<<"$("$bin" eval --help)" || fail "eval --help lists no --load"

# bad input: clear message, non-zero exit, no crash
if out=$("$bin" train --model lstm 2>&1); then fail "unknown model accepted"; fi
grep -q "unknown model 'lstm'" <<<"$out" || fail "unknown model message: $out"
if out=$("$bin" eval --load "$work/none.ckpt" 2>&1); then fail "missing checkpoint accepted"; fi
grep -q "none.ckpt" <<<"$out" || fail "missing checkpoint message: $out"
# refused ARGS... with a message holding PATTERN, at once (before any model is
# built or node spawned), and with no LibTorch stack trace
refused() {
  local pattern="$1" out
  shift
  if out=$(timeout 20 "$bin" "$@" 2>&1); then fail "accepted: $*"; fi
  grep -qF -- "$pattern" <<<"$out" || fail "$*: expected '$pattern', got: $out"
  if grep -q "frame #" <<<"$out"; then fail "$*: a stack trace: $out"; fi
}
# model options against the data and against zero sizes
refused "model cnn:classes=3 has 3 classes but Fashion-MNIST has 10" train --model cnn:classes=3
refused "image=1 is too small, layer conv1 would output 8x0x0 (cnn takes image=4 or more)" \
  train --model cnn:image=1 --dataset synthetic
refused "image=1 is too small" describe cnn:image=1
refused "model option hidden=1000000000 is too large (at most 1048576)" \
  train --model mlp:hidden=1000000000
# a model's memory, estimated before it is built
refused "(weights 38.9 GB," train --model resnet:blocks=100000
refused "this host has available" train --model mlp:hidden=1048576 --dataset synthetic --stages 2
# micro-batches against the batch
refused "--micro-batches 5 is more than --batch-size 4" \
  train --stages 2 --batch-size 4 --micro-batches 5 --dataset synthetic
# numeric ranges in words, on every subcommand
refused "error: --epochs must be at least 1, got 0" train --epochs 0
if out=$("$bin" train --epochs 0 2>&1); then :; fi
if grep -q "not in range" <<<"$out"; then fail "CLI11's range message: $out"; fi
refused "--epochs must be a whole number, got 'two'" train --epochs two
refused "--lr must be more than 0, got 0" train --lr 0
refused "--seed must be at least 0, got -1" train --seed -1
refused "--hang-timeout must be at least 1.5 and at most 3600 seconds, got 1" \
  supervisor --cluster /dev/null --hang-timeout 1
refused "--cpu-share must be at least 0.001 and at most 1, got 2" node --name n --cpu-share 2
refused "--device-type must name a type, got ' '" node --name n --device-type " "
refused "--threads must be at least 0, got -1" eval --load x.ckpt --threads -1
refused "--timeout must be more than 0" console 127.0.0.1:1 --timeout 0
# cluster files: the file, the line, the node and the problem
printf '[[node]]\nname = "node1"\naddress = "127.0.0.1:7100"\n\n[[node]]\nname = "node2"\naddress = 7101\n' \
  >"$work/typed.toml"
refused "cluster file $work/typed.toml:7: node 'node2': address must be a string like \"127.0.0.1:7101\", got the integer 7101" \
  supervisor --cluster "$work/typed.toml" --dataset synthetic
printf '[node]\nname = "node1"\naddress = "127.0.0.1:7100"\n' >"$work/single.toml"
refused "write [[node]], with two brackets" supervisor --cluster "$work/single.toml" --dataset synthetic
printf '[[node]]\nname = "node1"\nadress = "127.0.0.1:7100"\n' >"$work/typo.toml"
refused "typo.toml:3: node 'node1': unknown key 'adress'" \
  supervisor --cluster "$work/typo.toml" --dataset synthetic
if out=$("$bin" train --data "$work" --max-batches 1 2>&1); then fail "empty data dir accepted"; fi
grep -q "dataset-fashion-mnist" <<<"$out" || fail "missing data message: $out"
head -c 100 /dev/urandom >"$work/junk.ckpt"
if out=$("$bin" eval --load "$work/junk.ckpt" 2>&1); then fail "junk checkpoint accepted"; fi
grep -q "not a salamander checkpoint" <<<"$out" || fail "junk checkpoint message: $out"

# train, save, eval: the same accuracy
"$bin" train --model mlp --dataset synthetic --epochs 2 --save "$work/m.ckpt" >"$work/train.out" 2>"$work/train.err"
grep -q "epoch 2 done" "$work/train.err" || fail "no progress lines: $(cat "$work/train.err")"
train_acc=$(grep "^test accuracy:" "$work/train.out")
eval_acc=$("$bin" eval --load "$work/m.ckpt" --dataset synthetic 2>/dev/null | grep "^test accuracy:")
[ -n "$train_acc" ] || fail "train printed no accuracy"
[ "$train_acc" = "$eval_acc" ] || fail "train said '$train_acc', eval said '$eval_acc'"
grep -q "block32" <<<"$("$bin" describe vit:size=huge,image=224,channels=3,classes=1000)" || fail "describe"

# --version, and global options after the subcommand
grep -qE "^salamander [0-9]+\.[0-9]+\.[0-9]+" <<<"$("$bin" --version)" || fail "--version: $("$bin" --version 2>&1)"
grep -q "conv1" <<<"$("$bin" describe cnn --log-level warn)" || fail "--log-level after the subcommand"

# audit: an empty log, a wrong-typed line, a failed job
: >"$work/empty.jsonl"
if out=$("$bin" audit "$work/empty.jsonl" 2>&1); then fail "audit of an empty log passed"; else rc=$?; fi
[ "$rc" = 2 ] && grep -q "is empty" <<<"$out" || fail "audit of an empty log: $rc $out"
printf '%s\n' '{"t":0,"event":"start"}' '{"t":"x","event":5}' \
  '{"t":1,"event":"end","phase":"failed","error":"node n2 went away","committed":3,"lineage":[0,1,2]}' \
  >"$work/failed.jsonl"
if out=$("$bin" audit "$work/failed.jsonl" 2>&1); then fail "audit of a failed job passed"; else rc=$?; fi
[ "$rc" = 1 ] && grep -q "did NOT finish: node n2 went away" <<<"$out" && grep -q "line 2" <<<"$out" \
  || fail "audit of a failed job: $rc $out"
printf '%s\n' '{"t":1,"event":"end","phase":"finished","committed":"three","lineage":[0]}' \
  >"$work/typed.jsonl"
if out=$("$bin" audit "$work/typed.jsonl" 2>&1); then fail "audit of a wrong-typed field passed"; else rc=$?; fi
[ "$rc" = 2 ] && grep -q "typed.jsonl:1: the end event's field 'committed' should be a number, got \"three\"" <<<"$out" \
  || fail "audit of a wrong-typed field: $rc $out"

# plot: a wrong-typed line is named by file:line; a failed job shows as failed,
# with a key for the event colours and no line across a pause or an epoch's end
printf '%s\n' '{"t":0,"event":"start","model":"mlp"}' '{"t":1,"event":"batch","loss":"x"}' >"$work/badplot.jsonl"
if out=$("$bin" plot "$work/badplot.jsonl" -o "$work/bad.png" 2>&1); then fail "plot of a wrong-typed field passed"; else rc=$?; fi
[ "$rc" = 2 ] && grep -q "badplot.jsonl:2: the batch event's field 'loss' should be a number, got \"x\"" <<<"$out" \
  || fail "plot of a wrong-typed field: $rc $out"
{
  echo '{"t":0,"event":"start","model":"mlp","nodes":["n1","n2"]}'
  for i in 1 2 3; do echo "{\"t\":$i,\"event\":\"batch\",\"batch\":$i,\"epoch\":0,\"samples_per_s\":100,\"loss\":1}"; done
  echo '{"t":3.5,"event":"pause","committed":3}'
  for i in 4 5; do echo "{\"t\":$((i + 1)),\"event\":\"batch\",\"batch\":$i,\"epoch\":0,\"samples_per_s\":90,\"loss\":0.8}"; done
  for i in 6 7; do echo "{\"t\":$((i + 1)),\"event\":\"batch\",\"batch\":$i,\"epoch\":1,\"samples_per_s\":90,\"loss\":0.7}"; done
  echo '{"t":8.5,"event":"failure","what":"node n2 went away","committed":8}'
  echo '{"t":9,"event":"end","phase":"failed","error":"node n2 went away","committed":8,"lineage":[0]}'
} >"$work/failed-run.jsonl"
"$bin" plot "$work/failed-run.jsonl" -o "$work/failed.png" --script "$work/failed.gp" 2>/dev/null >/dev/null \
  || fail "plot of a failed job: $("$bin" plot "$work/failed-run.jsonl" -o "$work/failed.png" 2>&1)"
[ "$(head -c 4 "$work/failed.png" | tail -c 3)" = "PNG" ] || fail "plot of a failed job wrote no PNG"
grep -q 'title "salamander: mlp on 2 nodes, FAILED at 9.0 s: node n2 went away"' "$work/failed.gp" \
  || fail "plot title of a failed job: $(grep multiplot "$work/failed.gp")"
grep -q 'set label "FAILED" at 9,' "$work/failed.gp" || fail "plot has no end marker"
for k in '"pause / resume"' '"failure"' '"job failed"'; do
  grep -q "title $k" "$work/failed.gp" || fail "plot key lacks $k: $(grep '^plot' "$work/failed.gp")"
done
# the points' lines break (a blank line) after the pause and at the new epoch
breaks=$(sed -n '/^\$batches <</,/^EOD/p' "$work/failed.gp" | grep -c '^$')
[ "$breaks" = 2 ] || fail "plot lines break $breaks times, not 2: $(sed -n '/^\$batches/,/^EOD/p' "$work/failed.gp")"

# pipelines: embedded, and over node processes started by the local-cluster script
"$bin" train --model mlp --dataset synthetic --stages 3 --epochs 1 >"$work/emb.out" 2>"$work/emb.err" \
  || fail "embedded pipeline: $(tail -5 "$work/emb.err")"
grep -q "^test accuracy:" "$work/emb.out" || fail "embedded pipeline printed no accuracy"
grep -q "^throughput:" "$work/emb.out" || fail "embedded pipeline printed no throughput"
# on a 60-column terminal every progress update fits in 59 columns (a longer
# one wraps, and each update then leaves a stale copy above). On an idle host
# the 64 batches can end before the first update, so the last line, which
# reads [finished], counts too; a run with neither fails with its output.
if command -v script >/dev/null; then
  script -qec "stty cols 60; $bin train --model mlp --dataset synthetic --stages 2 --epochs 1 --metrics none" \
    /dev/null >"$work/pty.out" 2>&1 || fail "pipeline on a terminal: $(tail -5 "$work/pty.out")"
  widest=$(tr '\r' '\n' <"$work/pty.out" | sed 's/\x1b\[[0-9;]*[mK]//g' \
    | { grep -E '^\[(training|finished)\]' || true; } \
    | awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')
  [ "$widest" -gt 0 ] && [ "$widest" -le 59 ] || fail "progress line of $widest columns on 60: $(cat "$work/pty.out")"
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/logs" "$root/deploy/local-cluster.sh" 2 "$work/cluster.toml" \
  "$bin" supervisor --cluster "$work/cluster.toml" --model mlp --dataset synthetic --epochs 1 \
  >"$work/dist.out" 2>"$work/dist.err" || fail "distributed pipeline: $(tail -5 "$work/dist.err")"
grep -q "^test accuracy:" "$work/dist.out" || fail "distributed pipeline printed no accuracy"
grep -q "leaving (SIGTERM)" "$work/logs/node1.log" || fail "node did not leave cleanly: $(cat "$work/logs/node1.log")"
if out=$("$bin" train --stages 9 --plan even --model cnn --dataset synthetic 2>&1); then fail "9 stages of 4 layers accepted"; fi
grep -q "model cnn has 4 layers, so at most 4 stages" <<<"$out" || fail "too many stages message: $out"
printf '[[node]]\nname = "ghost"\naddress = "127.0.0.1:1"\n' >"$work/ghost.toml"
if out=$("$bin" supervisor --cluster "$work/ghost.toml" --dataset synthetic 2>&1); then fail "unreachable node accepted"; fi
grep -q "ghost" <<<"$out" || fail "unreachable node message: $out"

# a node started later joins the running job through the supervisor's --listen
port=$(free_port)
SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/jlogs" "$root/deploy/local-cluster.sh" 2 "$work/jc.toml" \
  "$bin" supervisor --cluster "$work/jc.toml" --model mlp --dataset synthetic --epochs 30 --log-level debug \
  --plan even --listen "127.0.0.1:$port" >"$work/join.out" 2>"$work/join.err" &
sup=$!
# once the supervisor answers on its port, one late node joins; a loaded host
# may take seconds to start either, so wait for each by what it says
for _ in $(seq 1 600); do
  "$bin" chaos --supervisor "127.0.0.1:$port" status >/dev/null 2>&1 && break
  kill -0 "$sup" 2>/dev/null || break
  sleep 0.1
done
"$bin" node --name latecomer --listen 127.0.0.1:0 --join "127.0.0.1:$port" \
  >"$work/late.out" 2>"$work/late.err" &
late=$!
joined=""
# (an offer left unanswered is made again after 30 s, up to three times)
for _ in $(seq 1 1200); do
  if grep -q "joined" "$work/late.err"; then joined=yes; break; fi
  kill -0 "$late" 2>/dev/null || break
  sleep 0.1
done
wait "$sup" || fail "job with a late node failed: $(tail -5 "$work/join.err")"
kill -TERM "$late" 2>/dev/null || true
wait "$late" 2>/dev/null || true
[ -n "$joined" ] || fail "the late node never joined: $(cat "$work/late.err")
the supervisor said: $(cat "$work/join.err")"
grep -q "latecomer\[" "$work/join.err" || fail "the late node was not planned in: $(grep plan "$work/join.err")"

# salamander chaos against a running job: crash a stage, kill a node's process
cport=$(free_port)
SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/clogs" "$root/deploy/local-cluster.sh" 3 "$work/cc.toml" \
  "$bin" supervisor --cluster "$work/cc.toml" --model mlp --dataset synthetic --epochs 30 \
  --plan even --listen "127.0.0.1:$cport" >"$work/chaos.out" 2>"$work/chaos.err" &
csup=$!
for _ in $(seq 1 40); do
  sleep 0.25
  "$bin" chaos --supervisor "127.0.0.1:$cport" status >"$work/status.out" 2>/dev/null && break
done
grep -q "plan v" "$work/status.out" || fail "chaos status: $(cat "$work/status.out")"
grep -q "killed" <<<"$("$bin" chaos --supervisor "127.0.0.1:$cport" kill-stage 0)" || fail "chaos kill-stage"
sleep 1
grep -q "killing itself" <<<"$("$bin" chaos --supervisor "127.0.0.1:$cport" kill-node node2)" \
  || fail "chaos kill-node"
if "$bin" chaos --supervisor "127.0.0.1:$cport" kill-node nosuch 2>/dev/null; then
  fail "chaos killed a node that does not exist"
fi
wait "$csup" || fail "job under chaos failed: $(tail -5 "$work/chaos.err")"
grep -q "recovered from 2 failure(s)" "$work/chaos.err" || fail "no recovery: $(tail -3 "$work/chaos.err")"
grep -q "^test accuracy:" "$work/chaos.out" || fail "job under chaos printed no accuracy"
echo "cli: all checks passed"
