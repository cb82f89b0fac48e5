"""Lattice: defaults, derived geometry, immutability and every input error (DESIGN §7, §9)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lattice_lgm import Lattice, LatticeLGMError
from lattice_lgm.errors import (
    GeographicCoordinatesError,
    InvalidParameterError,
    ShapeMismatchError,
)
from lattice_lgm.lattice import default_dims

# -- defaults -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "dims"),
    [((7,), ("x",)), ((3, 5), ("y", "x")), ((2, 3, 4), ("t", "y", "x"))],
)
def test_default_dims_spacing_origin(shape, dims):
    lat = Lattice(shape)
    assert lat.dims == dims
    assert lat.ndim == len(shape)
    assert lat.shape == shape
    assert lat.spacing == (1.0,) * len(shape)
    assert lat.origin == (0.0,) * len(shape)
    assert lat.size == int(np.prod(shape))
    assert default_dims(len(shape)) == dims


def test_default_dims_rejects_unsupported_ndim():
    with pytest.raises(InvalidParameterError, match="ndim=4"):
        default_dims(4)


def test_scalar_spacing_and_origin_broadcast():
    lat = Lattice((3, 4), spacing=2.5, origin=-1.0)
    assert lat.spacing == (2.5, 2.5)
    assert lat.origin == (-1.0, -1.0)
    assert all(type(v) is float for v in (*lat.spacing, *lat.origin))
    assert all(type(n) is int for n in lat.shape)


def test_per_axis_spacing_and_origin_are_kept_in_order():
    lat = Lattice((3, 4), spacing=(2.0, 0.5), origin=(10.0, -3.0))
    assert lat.spacing == (2.0, 0.5)
    assert lat.origin == (10.0, -3.0)


def test_numpy_integer_shape_is_normalised():
    lat = Lattice(np.array([4, 6], dtype=np.int32))
    assert lat.shape == (4, 6)
    assert all(type(n) is int for n in lat.shape)


# -- derived geometry ---------------------------------------------------------------------------


def test_coords_are_cell_centres():
    lat = Lattice((3, 4), spacing=(2.0, 0.5), origin=(10.0, -3.0), dims=("north", "east"))
    c = lat.coords()
    assert list(c) == ["north", "east"]
    np.testing.assert_allclose(c["north"], [11.0, 13.0, 15.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(c["east"], [-2.75, -2.25, -1.75, -1.25], rtol=0, atol=1e-15)


def test_cell_centers_are_row_major():
    lat = Lattice((2, 3), spacing=(2.0, 1.0), origin=(0.0, 5.0))
    expected = np.array(
        [[1.0, 5.5], [1.0, 6.5], [1.0, 7.5], [3.0, 5.5], [3.0, 6.5], [3.0, 7.5]]
    )
    np.testing.assert_allclose(lat.cell_centers(), expected, rtol=0, atol=1e-15)
    # consistent with reshaping a field of lattice.shape in C order
    field = np.arange(6).reshape(lat.shape)
    i, j = np.unravel_index(4, lat.shape)
    assert field.ravel()[4] == field[i, j]
    np.testing.assert_allclose(lat.cell_centers()[4], [lat.coords()["y"][i], lat.coords()["x"][j]])


def test_cell_centers_3d_shape():
    lat = Lattice((2, 3, 4), spacing=(1.0, 2.0, 3.0))
    cc = lat.cell_centers()
    assert cc.shape == (24, 3)
    np.testing.assert_allclose(cc[-1], [1.5, 5.0, 10.5])


def test_extent_side_lengths_cell_volume():
    lat = Lattice((3, 4), spacing=(2.0, 0.5), origin=(10.0, -3.0))
    assert lat.extent == ((10.0, 16.0), (-3.0, -1.0))
    assert lat.side_lengths == (6.0, 2.0)
    assert lat.cell_volume == pytest.approx(1.0)
    assert Lattice((5,), spacing=0.2).cell_volume == pytest.approx(0.2)
    assert Lattice((2, 2, 2), spacing=(1.0, 2.0, 3.0)).cell_volume == pytest.approx(6.0)


def test_padded_keeps_cell_centres_of_the_original():
    lat = Lattice((3, 4), spacing=(2.0, 0.5), origin=(10.0, -3.0), units="m", crs="EPSG:32617")
    big = lat.padded((2, 1))
    assert big.shape == (7, 6)
    assert big.spacing == lat.spacing
    assert big.origin == pytest.approx((6.0, -3.5))
    assert (big.dims, big.units, big.crs) == (lat.dims, lat.units, lat.crs)
    np.testing.assert_allclose(big.coords()["y"][2:-2], lat.coords()["y"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(big.coords()["x"][1:-1], lat.coords()["x"], rtol=0, atol=1e-12)


def test_padded_scalar_pad_broadcasts():
    assert Lattice((3, 4)).padded(1).shape == (5, 6)


def test_padded_wrong_length_names_pad():
    with pytest.raises(ShapeMismatchError, match=r"pad=\(1, 2, 3\)"):
        Lattice((3, 4)).padded((1, 2, 3))


# -- immutability -------------------------------------------------------------------------------


@pytest.mark.parametrize("attr", ["shape", "spacing", "origin", "dims", "units", "crs"])
def test_lattice_is_immutable(attr):
    lat = Lattice((3, 4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(lat, attr, getattr(lat, attr))


def test_lattice_is_hashable_and_equal_by_value():
    a = Lattice((3, 4), spacing=2.0)
    b = Lattice((3, 4), spacing=(2.0, 2.0))
    assert a == b
    assert hash(a) == hash(b)
    assert a != Lattice((3, 4), spacing=(2.0, 1.0))


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spacing", "pattern"),
    [
        (0.0, r"spacing=0\.0"),
        (-1.0, r"spacing=-1\.0"),
        (float("nan"), r"spacing=nan"),
        (float("inf"), r"spacing=inf"),
        ((1.0, -2.0), r"spacing\[1\]=-2\.0"),
        ((float("nan"), 1.0), r"spacing\[0\]=nan"),
        ("abc", r"spacing='abc' is not a number"),
    ],
)
def test_bad_spacing(spacing, pattern):
    with pytest.raises(InvalidParameterError, match=pattern):
        Lattice((3, 4), spacing=spacing)


def test_spacing_with_wrong_number_of_axes():
    with pytest.raises(ShapeMismatchError, match=r"spacing=\(1\.0, 2\.0, 3\.0\) has 3 entries"):
        Lattice((3, 4), spacing=(1.0, 2.0, 3.0))


@pytest.mark.parametrize(
    ("shape", "pattern"),
    [
        ((0, 4), r"shape=\(0, 4\)"),
        ((3, -1), r"shape=\(3, -1\)"),
        ((2, 2, 2, 2), r"shape=\(2, 2, 2, 2\)"),
        ((), r"shape=\(\)"),
        ((2.5, 3), r"shape=\(2\.5, 3\)"),
        ((3.0, 4.0), r"shape=\(3\.0, 4\.0\)"),
        (((2, 3), (4, 5)), r"shape=\(\(2, 3\), \(4, 5\)\)"),
    ],
)
def test_bad_shape(shape, pattern):
    with pytest.raises(InvalidParameterError, match=pattern):
        Lattice(shape)


@pytest.mark.parametrize(
    "origin", [float("nan"), (0.0, float("inf")), (float("nan"), 1.0)]
)
def test_non_finite_origin(origin):
    with pytest.raises(InvalidParameterError, match="origin="):
        Lattice((3, 4), origin=origin)


def test_origin_with_wrong_number_of_axes_names_origin():
    with pytest.raises(ShapeMismatchError, match=r"origin=\(1\.0, 2\.0, 3\.0\)"):
        Lattice((3, 4), origin=(1.0, 2.0, 3.0))


@pytest.mark.parametrize(
    ("dims", "pattern"),
    [(("x",), r"dims=\('x',\)"), (("a", "b", "c"), r"dims=\('a', 'b', 'c'\)"),
     (("y", "y"), r"dims=\('y', 'y'\) must be 2 distinct")],
)
def test_bad_dims(dims, pattern):
    with pytest.raises(ShapeMismatchError, match=pattern):
        Lattice((3, 4), dims=dims)


def test_custom_dims_are_kept():
    assert Lattice((3, 4), dims=("northing", "easting")).dims == ("northing", "easting")


@pytest.mark.parametrize(
    "crs",
    [
        "EPSG:4326",
        "epsg:4326",
        "+proj=longlat +datum=WGS84 +no_defs",
        "OGC:CRS84",
        " WGS84 ",
    ],
)
def test_geographic_crs_is_refused(crs):
    with pytest.raises(GeographicCoordinatesError, match=r"(?i)project") as info:
        Lattice((3, 4), crs=crs)
    assert repr(crs) in str(info.value)
    assert isinstance(info.value, LatticeLGMError)


@pytest.mark.parametrize("units", ["degrees", "Degrees", "deg", "radians"])
def test_angular_units_are_refused(units):
    with pytest.raises(GeographicCoordinatesError, match=r"(?i)project") as info:
        Lattice((3, 4), units=units)
    assert repr(units) in str(info.value)


@pytest.mark.parametrize("crs", ["EPSG:32617", "+proj=utm +zone=17 +datum=WGS84 +units=m"])
def test_projected_crs_is_accepted(crs):
    lat = Lattice((3, 4), spacing=100.0, units="m", crs=crs)
    assert lat.crs == crs
    assert lat.units == "m"
    assert crs in repr(lat)


def test_repr_mentions_shape_spacing_units():
    r = repr(Lattice((3, 4), spacing=10.0, units="m"))
    assert "shape=(3, 4)" in r
    assert "spacing=(10.0, 10.0) m" in r
