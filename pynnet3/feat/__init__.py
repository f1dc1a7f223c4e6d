"""Feature processing as Kaldi's feat/ and transform/ (cepstral mean and
variance normalization)."""
