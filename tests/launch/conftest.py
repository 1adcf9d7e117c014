"""Fixtures of the launch tests: the real clusters (tests/clusters.py), started once per
test session and stopped after it."""

from __future__ import annotations

import pytest

from tests.clusters import start_ray, start_slurm, stop_ray, stop_slurm


@pytest.fixture(scope="session")
def slurm_cluster():
    cluster = start_slurm()
    try:
        yield cluster
    finally:
        stop_slurm(cluster)


@pytest.fixture
def slurm(slurm_cluster, monkeypatch):
    """The one-node Slurm cluster, its SLURM_CONF set for this test (and the jobs it submits)."""
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster


@pytest.fixture(scope="session")
def ray_cluster():
    cluster = start_ray()
    try:
        yield cluster
    finally:
        stop_ray(cluster)


@pytest.fixture
def ray(ray_cluster, monkeypatch):
    """The one-node Ray cluster, with what a client needs to join it set for this test."""
    for key, value in ray_cluster.env.items():
        monkeypatch.setenv(key, value)
    return ray_cluster
