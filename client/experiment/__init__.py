"""The SAPO paper's controlled experiment, played through the real node code: on devnets, or
by the in-process swarm."""

from client.experiment.config import ExperimentConfig, ExperimentError, load_experiment
from client.experiment.run import run_experiment

__all__ = ["ExperimentConfig", "ExperimentError", "load_experiment", "run_experiment"]
