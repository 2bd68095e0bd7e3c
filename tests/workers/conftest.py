"""Shared fixtures for the evaluation-core tests: fixture sources and one interpreter sandbox
child per test module (starting one costs seconds; evaluations reuse it)."""

import os

import pytest

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def read_fixture(*parts) -> str:
    with open(os.path.join(FIXTURES, *parts)) as fh:
        return fh.read()


@pytest.fixture(scope="module")
def evaluator():
    from workers.evaluate import Evaluator

    with Evaluator() as ev:
        yield ev
