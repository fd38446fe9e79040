#!/bin/sh
# Records ARX's SafePub scores for tests/solver/test_safepub_search.py:
#   ARXSIDE_WORK=/tmp/arxside-l40 benchmarks/arx_dp/record_scores.sh > tests/solver/safepub_arx_scores.jsonl
# ARX's deterministic mode (its fixed Random(0xDEADBEEF) for the sample and the mechanism), the
# configuration of ARX's TestAnonymizationDifferentialPrivacy (delta 1e-5, suppression limit 1,
# steps as expansions) with epsilon_anonymization 1 (k = 62, beta = 1 - 1/e, the same sample in
# every run) and several budgets and step counts: each run yields its best pivot and that pivot's
# ILScore, so the grid gives many nodes' scores on one sample.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${SHARED_DATA:-$HERE/../../../shared/data}
CP=$(cat "$ARXSIDE_WORK/classpath.txt")
OUT=${ARXDP_CLASSES:-/tmp/arxdp-classes}
mkdir -p "$OUT"
javac -cp "$CP" -d "$OUT" "$HERE/ArxDp.java"
for ds in adult cup; do
  if [ $ds = adult ]; then
    qis=sex,age,race,marital-status,education,native-country,workclass,occupation,salary-class
  else
    qis=ZIP,AGE,GENDER,INCOME,STATE,RAMNTALL,NGIFTALL,MINRAMNT
  fi
  java -cp "$OUT:$CP" ArxDp data=$DATA/$ds/$ds.csv "hier=$DATA/$ds/${ds}_hierarchy_{col}.csv" qis=$qis \
    metric=loss,precision,discernibility,aecs,entropy epsilon_anon=1 delta=1e-5 budget=1,0.25,4 steps=1,3,10 \
    deterministic=1 nodes=1 | sed -n "s/^RUN {/{\"data\":\"$ds\",\"qis\":\"$qis\",/p"
done
