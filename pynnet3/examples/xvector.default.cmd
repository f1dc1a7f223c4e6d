OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=2 nnet3-xvector-compute xvector.raw ark:xvector-feats.ark ark:xvector.default.ark
