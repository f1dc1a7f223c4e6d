#!/usr/bin/env bash
# A decode.sh-like recipe (steps/nnet3/decode.sh, steps/diagnostic/analyze_lats.sh
# and steps/score_kaldi.sh, reduced to the commands they run): CMVN statistics
# and features through apply-cmvn (decode.sh's default cmvn_opts), split the
# data, decode the parts in parallel jobs into gzipped lattices (with
# nnet3-latgen-faster-parallel when NUM_THREADS > 1, as decode.sh
# --num-threads), analyze_lats.sh's depth and phone statistics
# (lattice-depth-per-frame | lattice-best-path, ali-to-phones --write-lengths
# and --per-frame), then score every LM weight with lattice-scale |
# lattice-add-penalty | lattice-best-path and, for LM weight 10, with
# score_kaldi.sh's --decode-mbr pipeline (lattice-prune | lattice-mbr-decode);
# given a reference text, score each LM weight with compute-wer and align the
# best one with align-text and compute-wer-bootci as
# steps/scoring/score_kaldi_wer.sh does.
# Usage: [NUM_THREADS=n] decode_recipe.sh <nj> <model> <graphdir> <feats.scp> <online-ivectors-rspecifier> <dir> [<ref-text>]
set -euo pipefail
nj=$1; model=$2; graphdir=$3; feats_scp=$4; ivectors=$5; dir=$6; ref_text=${7:-}
num_threads=${NUM_THREADS:-1}
mkdir -p $dir/split$nj $dir/log $dir/scoring
awk '{ print $1, $1 }' $feats_scp > $dir/utt2spk
compute-cmvn-stats scp:$feats_scp ark,scp:$dir/cmvn.ark,$dir/cmvn.scp 2> $dir/log/cmvn.log
num_utts=$(wc -l < $feats_scp)
for n in $(seq $nj); do
  awk -v n=$n -v nj=$nj -v tot=$num_utts \
    'NR > int((n-1)*tot/nj) && NR <= int(n*tot/nj)' $feats_scp > $dir/split$nj/feats.$n.scp
done
thread_string=
if [ $num_threads -gt 1 ]; then thread_string="-parallel --num-threads=$num_threads"; fi
pids=()
for n in $(seq $nj); do
  feats="ark,s,cs:apply-cmvn --norm-means=false --norm-vars=false --utt2spk=ark:$dir/utt2spk scp:$dir/cmvn.scp scp:$dir/split$nj/feats.$n.scp ark:- |"
  nnet3-latgen-faster$thread_string --online-ivectors=$ivectors --online-ivector-period=10 \
    --frames-per-chunk=50 --extra-left-context=0 --extra-right-context=0 \
    --minimize=false --max-active=7000 --min-active=200 --beam=15.0 --lattice-beam=8.0 \
    --acoustic-scale=0.1 --allow-partial=true --word-symbol-table=$graphdir/words.txt \
    $model $graphdir/HCLG.fst "$feats" \
    "ark:|gzip -c > $dir/lat.$n.gz" 2> $dir/log/decode.$n.log &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait $pid; done
echo $nj > $dir/num_jobs
for n in $(seq $nj); do
  lattice-depth-per-frame "ark:gunzip -c $dir/lat.$n.gz|" "ark,t:|gzip -c > $dir/depth_tmp.$n.gz" ark:- | \
    lattice-best-path --acoustic-scale=0.1 ark:- ark:/dev/null "ark,t:|gzip -c >$dir/ali_tmp.$n.gz" \
    2> $dir/log/lattice_best_path.$n.log
  ali-to-phones --write-lengths=true $model "ark:gunzip -c $dir/ali_tmp.$n.gz|" ark,t:- \
    > $dir/phone_stats.$n 2> $dir/log/get_lattice_stats.$n.log
done
ali-to-phones --per-frame=true $model "ark:gunzip -c $dir/ali_tmp.*.gz|" \
  "ark,t:|gzip -c >$dir/ali_frame_tmp.gz" 2> $dir/log/dump_ali_frame.log
for lmwt in 9 10 11; do
  lattice-scale --inv-acoustic-scale=$lmwt "ark:gunzip -c $dir/lat.*.gz|" ark:- | \
    lattice-add-penalty --word-ins-penalty=0.0 ark:- ark:- | \
    lattice-best-path --word-symbol-table=$graphdir/words.txt ark:- ark,t:- | \
    awk -v syms=$graphdir/words.txt 'BEGIN { while ((getline l < syms) > 0) { split(l, a, " "); w[a[2]] = a[1] } }
         { printf "%s", $1; for (i = 2; i <= NF; i++) printf " %s", w[$i]; printf "\n" }' \
    > $dir/scoring/$lmwt.txt 2> $dir/log/score.$lmwt.log
done
lattice-scale --inv-acoustic-scale=10 "ark:gunzip -c $dir/lat.*.gz|" ark:- | \
  lattice-add-penalty --word-ins-penalty=0.0 ark:- ark:- | \
  lattice-prune --beam=6 ark:- ark:- | \
  lattice-mbr-decode --word-symbol-table=$graphdir/words.txt ark:- ark,t:- \
  > $dir/scoring/mbr_10.int 2> $dir/log/mbr.10.log
if [ -n "$ref_text" ]; then
  for lmwt in 9 10 11; do
    cat $dir/scoring/$lmwt.txt | \
      compute-wer --text --mode=present ark:$ref_text ark,p:- >& $dir/wer_$lmwt
  done
  best_lmwt=$(for lmwt in 9 10 11; do grep WER $dir/wer_$lmwt /dev/null; done | \
    sort -n -k2 | head -n 1 | cut -d: -f1 | sed 's/.*wer_//')
  cat $dir/scoring/$best_lmwt.txt | \
    align-text --special-symbol='***' ark:$ref_text ark:- ark,t:- > $dir/scoring/per_utt_align \
    2> $dir/log/stats1.log
  compute-wer-bootci --mode=present ark:$ref_text ark:$dir/scoring/$best_lmwt.txt \
    > $dir/scoring/wer_bootci 2> $dir/log/wer_bootci.log
fi
