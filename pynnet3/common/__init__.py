"""The base layer under both nnet/ and components/ (Kaldi's nnet-common.h and
nnet-parse.h): Index and Cindex and their serialization, config-line parsing,
parameter statistics as Info() prints them, Kaldi's float32 (BaseFloat)
rounding and printing, and giving freed heap memory back to the operating
system after a compilation."""
