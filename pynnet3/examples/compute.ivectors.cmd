OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=2 nnet3-compute --ivectors=ark:ivectors.ark tdnn_lda.raw ark:feats.ark ark:compute.ivectors.ark
