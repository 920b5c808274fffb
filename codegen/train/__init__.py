"""`ctrgen train` and `ctrgen report`: a training run of the generated PyTorch trainer and its one-page report."""
