"""A small Python module with a class, a method between others and a top-level function: the
file the edit-pipeline and language-server integrity tests edit spans of."""
from __future__ import annotations

SHAPES = '''import math


class Circle:
    def __init__(self, radius):
        self.radius = radius

    def area(self):
        return math.pi * self.radius ** 2


def unit():
    return Circle(1)
'''
