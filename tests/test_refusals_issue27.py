"""Inputs accepted silently before issue 27, refused before any work now."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lattice_lgm import LGCP
from lattice_lgm.errors import InvalidParameterError
from lattice_lgm.hyperpriors import PCPriorRange


def _points(n=40, seed=0):
    return np.random.default_rng(seed).uniform(0, 100, size=(n, 2))


def test_a_pc_range_prior_with_rho0_above_its_bound_is_vacuous():
    with pytest.raises(InvalidParameterError, match=r"rho0=50.0 is not below upper=20.0"):
        PCPriorRange(50.0, 0.05, ndim=2, upper=20.0)
    with pytest.raises(InvalidParameterError, match="state nothing"):
        PCPriorRange(20.0, 0.05, ndim=2, upper=20.0)
    assert PCPriorRange(5.0, 0.05, ndim=2, upper=20.0).upper == 20.0


def test_a_one_cell_lattice_is_refused():
    with pytest.raises(InvalidParameterError, match=r"shape \(1, 1\): one cell"):
        LGCP(_points(), (0, 100, 0, 100), cell_size=100.0, units="m")
    LGCP(_points(), (0, 100, 0, 100), cell_size=50.0, units="m")  # 2 × 2 is a field


def test_a_range_bound_below_the_cell_size_is_refused():
    with pytest.raises(InvalidParameterError,
                       match=r"upper bound 4\.0 is below the cell size 10\.0"):
        LGCP(_points(), (0, 100, 0, 100), cell_size=10.0, units="m",
             range_prior=PCPriorRange(1.0, 0.05, ndim=2, upper=4.0))
    LGCP(_points(), (0, 100, 0, 100), cell_size=10.0, units="m",
         range_prior=PCPriorRange(1.0, 0.05, ndim=2, upper=40.0))


def test_lonlat_looking_coordinates_without_crs_or_units_are_warned_about():
    from lattice_lgm.models.lgcp import GeographicCoordinatesWarning

    rng = np.random.default_rng(1)
    lonlat = np.column_stack([rng.uniform(10.0, 10.5, 50), rng.uniform(45.0, 45.3, 50)])
    with pytest.warns(GeographicCoordinatesWarning, match=r"x 10…10\.5, y 45…45\.3"):
        LGCP(lonlat, (10.0, 10.5, 45.0, 45.3), cell_size=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GeographicCoordinatesWarning)
        LGCP(lonlat, (10.0, 10.5, 45.0, 45.3), cell_size=0.05, units="km")  # said: planar
        LGCP(_points() * 10, (0, 1000, 0, 1000), cell_size=100.0)  # beyond ±180: not degrees


def test_a_geojson_window_in_metres_is_not_refused_as_lonlat(tmp_path):
    """GeoJSON has no CRS member, so readers label every file EPSG:4326."""
    gpd = pytest.importorskip("geopandas")
    from shapely.geometry import box

    from lattice_lgm import Window
    from lattice_lgm.errors import GeographicCoordinatesError

    path = tmp_path / "w.geojson"
    with warnings.catch_warnings():  # the writer's own note that no CRS is written
        warnings.simplefilter("ignore", UserWarning)
        gpd.GeoDataFrame(geometry=[box(0, 0, 1000, 500)]).to_file(path, driver="GeoJSON")
    read = gpd.read_file(path)
    assert read.crs is not None and read.crs.is_geographic  # what the reader says
    with pytest.warns(UserWarning, match=r"cannot be degrees: read as planar"):
        w = Window.from_geodataframe(read)
    assert w.crs is None and w.bounds == ((0.0, 1000.0), (0.0, 500.0))
    degrees = gpd.GeoDataFrame(geometry=[box(10, 45, 10.5, 45.3)], crs="EPSG:4326")
    with pytest.raises(GeographicCoordinatesError, match="geographic"):
        Window.from_geodataframe(degrees)


@pytest.mark.parametrize("cell, refused", [(0.01, True), (0.1, True), (10.0, False)])
def test_a_lattice_too_large_to_build_is_refused_before_binning(cell, refused, monkeypatch):
    """bei's window at 0.01 m: a raw MemoryError for 37 GiB before; at 0.1 m a GLM traceback."""
    from lattice_lgm.models import lgcp as L
    from lattice_lgm.runs import ResourceLimitError

    monkeypatch.setattr(L, "available_memory", lambda: 24 * 2.0**30)  # this machine kind
    calls = []

    def binning(*a, **k):
        calls.append(1)
        raise RuntimeError("binned")

    monkeypatch.setattr(L, "bin_points", binning)
    if refused:
        with pytest.raises(ResourceLimitError, match=r"cells needs ≈ .* GiB .*coarser cell_size"):
            LGCP(_points(), (0, 1000, 0, 500), cell_size=cell, units="m")
        assert not calls  # nothing of the lattice's size was made
    else:
        with pytest.raises(RuntimeError, match="binned"):  # went on to bin the points
            LGCP(_points(), (0, 1000, 0, 500), cell_size=cell, units="m")
