"""The base layer under both nnet/ and components/ (Kaldi's nnet-common.h and
nnet-parse.h): Index and Cindex and their serialization, config-line parsing,
parameter statistics as Info() prints them, and Kaldi's float32 (BaseFloat)
rounding and printing."""
