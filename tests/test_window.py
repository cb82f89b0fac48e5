"""Windows, exposure and point binning (lattice_lgm.window; DESIGN §7, §9).

Exact cases are computed by hand (overlap lengths, areas of triangles and rectangles) or by an
independent route (numpy.histogram2d for counts, integer division for 1-D bins, one shapely
intersection per cell for exposure); none re-runs the code under test.
"""

from __future__ import annotations

import csv
import dataclasses
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import shapely
from shapely.geometry import LineString, MultiPolygon, Point, Polygon

from lattice_lgm.errors import (
    GeographicCoordinatesError,
    InvalidDataError,
    InvalidParameterError,
    LatticeLGMError,
    ShapeMismatchError,
    UnsupportedOperationError,
)
from lattice_lgm.lattice import Lattice
from lattice_lgm.window import BinnedPoints, Window, bin_points, lattice_for_window, read_points

DATA = Path(__file__).parent / "data"
LANSING = DATA / "lansing.csv"
UNIT = Window.rectangle(0.0, 1.0, 0.0, 1.0)


def lansing_xy() -> np.ndarray:
    """Lansing (x, y) read with the csv module (not through read_points)."""
    with LANSING.open() as fh:
        rows = list(csv.DictReader(fh))
    return np.array([[float(r["x"]), float(r["y"])] for r in rows])


def brute_exposure(geom, lat: Lattice) -> np.ndarray:
    """One shapely intersection per cell: slow but obviously right (independent oracle)."""
    (oy, ox), (hy, hx), (ny, nx) = lat.origin, lat.spacing, lat.shape
    ye, xe = oy + np.arange(ny + 1) * hy, ox + np.arange(nx + 1) * hx
    return np.array([[shapely.box(xe[j], ye[i], xe[j + 1], ye[i + 1]).intersection(geom).area
                      for j in range(nx)] for i in range(ny)])


# == exposure: exact cases ======================================================================


def test_rectangle_exposure_straddling_cells_by_hand():
    # Lattice: x cells [0,1],[1,2],[2,3]; y cells [0,1],[1,2]. Window [0.3, 2.2] x [0.5, 1.25]:
    # x overlaps 0.7, 1.0, 0.2; y overlaps 0.5, 0.25.
    w = Window.rectangle(0.3, 2.2, 0.5, 1.25)
    e = w.exposure(Lattice((2, 3)))
    expected = np.array([[0.35, 0.5, 0.1], [0.175, 0.25, 0.05]])
    assert e.shape == (2, 3) and e.dtype == np.float64
    np.testing.assert_allclose(e, expected, rtol=1e-14, atol=1e-15)


def test_rectangle_exposure_spacing_origin_and_window_past_lattice():
    # Lattice y cells [-1, 1], [1, 3]; x cells [10, 10.5], [10.5, 11]. Window [10.25, 12] x
    # [0, 5] runs past the lattice: x overlaps 0.25, 0.5; y overlaps 1, 2.
    lat = Lattice((2, 2), spacing=(2.0, 0.5), origin=(-1.0, 10.0))
    e = Window.rectangle(10.25, 12.0, 0.0, 5.0).exposure(lat)
    np.testing.assert_allclose(e, [[0.25, 0.5], [0.5, 1.0]], rtol=1e-14)


def test_rectangle_exposure_equals_polygon_path():
    lat = Lattice((7, 9), spacing=(0.3, 0.2), origin=(-0.1, 0.05))
    rect = Window.rectangle(0.13, 1.61, 0.07, 1.77)
    poly = Window.from_geometry(shapely.box(0.13, 0.07, 1.61, 1.77))
    np.testing.assert_allclose(rect.exposure(lat), poly.exposure(lat), rtol=1e-12, atol=1e-15)


def test_square_with_square_hole_by_hand():
    # [0,4]^2 minus the hole [1.5, 2.5]^2 on unit cells: each of the 4 central cells loses a
    # 0.5 x 0.5 corner (0.25); every other cell is whole.
    geom = Polygon([(0, 0), (4, 0), (4, 4), (0, 4)],
                   [[(1.5, 1.5), (2.5, 1.5), (2.5, 2.5), (1.5, 2.5)]])
    e = Window.from_geometry(geom).exposure(Lattice((4, 4)))
    expected = np.ones((4, 4))
    expected[1:3, 1:3] = 0.75
    np.testing.assert_allclose(e, expected, rtol=1e-14)


def test_triangle_closed_form():
    # Triangle (0,0), (2,0), (0,1): y <= 1 - x/2. Cell [0,1]^2 holds int_0^1 (1 - x/2) dx = 0.75,
    # cell [1,2]x[0,1] holds int_1^2 (1 - x/2) dx = 0.25, the upper row nothing.
    e = Window.from_geometry(Polygon([(0, 0), (2, 0), (0, 1)])).exposure(Lattice((2, 2)))
    np.testing.assert_allclose(e, [[0.75, 0.25], [0.0, 0.0]], rtol=1e-14, atol=1e-15)


def test_right_triangle_on_a_scaled_lattice():
    # Triangle (0,0), (1.5,0), (0,1.5) on 0.5-cells: cells below the anti-diagonal are whole
    # (0.25), the cells it crosses hold half (0.125), those above nothing.
    e = Window.from_geometry(Polygon([(0, 0), (1.5, 0), (0, 1.5)])).exposure(
        Lattice((3, 3), spacing=0.5))
    expected = np.array([[0.25, 0.25, 0.125], [0.25, 0.125, 0.0], [0.125, 0.0, 0.0]])
    np.testing.assert_allclose(e, expected, rtol=1e-14, atol=1e-15)


def test_l_shape_by_hand():
    # L = [0,3]x[0,1] ∪ [0,1]x[0,3] (area 5) on 1.5-cells: lower-left cell holds
    # 1.5*1 + 1*0.5 = 2; the two arms' cells hold 1.5 each; the upper-right cell nothing.
    geom = Polygon([(0, 0), (3, 0), (3, 1), (1, 1), (1, 3), (0, 3)])
    e = Window.from_geometry(geom).exposure(Lattice((2, 2), spacing=1.5))
    np.testing.assert_allclose(e, [[2.0, 1.5], [1.5, 0.0]], rtol=1e-14, atol=1e-15)


def star_polygon(seed: int, n: int = 200, hole: bool = True) -> Polygon:
    """A star-shaped polygon (radius 40..100 around 0) with an optional off-centre hole."""
    rng = np.random.default_rng(seed)
    th = np.sort(rng.uniform(0, 2 * np.pi, n))
    r = rng.uniform(40.0, 100.0, n)
    holes = [[(-10, -10), (15, -12), (20, 18), (-12, 9)]] if hole else []
    return Polygon(np.c_[r * np.cos(th), r * np.sin(th)], holes)


# 200 vertices: cells are clipped against the whole polygon; 900: the polygon is first cut into
# row bands (more than window._LOCAL_VERTICES vertices), a different code path.
@pytest.mark.parametrize("n_vertices", [200, 900])
def test_polygon_with_hole_sums_to_area_and_matches_brute_force(n_vertices):
    geom = star_polygon(1, n=n_vertices)
    assert geom.is_valid and len(geom.interiors) == 1
    w = Window.from_geometry(geom)
    lat = lattice_for_window(w, cell_size=(5.3, 4.9))  # non-dividing sizes: ragged top/right
    e = w.exposure(lat)
    assert abs(e.sum() - geom.area) <= 1e-9 * geom.area
    np.testing.assert_allclose(e, brute_exposure(geom, lat), rtol=0, atol=1e-9 * lat.cell_volume)


def test_boundary_along_cell_edges_matches_brute_force():
    # A staircase polygon whose edges all lie on cell edges, with a hole also on cell edges:
    # every cell is whole or empty.
    geom = Polygon([(0, 0), (4, 0), (4, 1), (3, 1), (3, 2.5), (1, 2.5), (1, 4), (0, 4)],
                   [[(0.5, 0.5), (2.5, 0.5), (2.5, 1.5), (0.5, 1.5)]])
    lat = Lattice((10, 10), spacing=0.5, origin=-0.5)
    e = Window.from_geometry(geom).exposure(lat)
    expected = brute_exposure(geom, lat)
    assert set(np.unique(expected)) == {0.0, 0.25}
    np.testing.assert_array_equal(e, expected)
    assert e.sum() == geom.area


def test_polygon_covering_or_missing_the_lattice():
    big = Window.from_geometry(shapely.box(-10, -10, 10, 10).buffer(1.0))
    np.testing.assert_array_equal(big.exposure(Lattice((3, 4), spacing=0.7)), 0.7 * 0.7)
    far = Window.from_geometry(shapely.box(100, 100, 101, 101))
    np.testing.assert_array_equal(far.exposure(Lattice((3, 4))), 0.0)


def test_multipolygon_sums_to_area():
    a = star_polygon(2)
    b = shapely.affinity.translate(star_polygon(3, hole=False), xoff=250.0, yoff=40.0)
    geom = MultiPolygon([a, b])
    assert geom.is_valid
    w = Window.from_geometry(geom)
    e = w.exposure(lattice_for_window(w, shape=(23, 57)))
    assert abs(e.sum() - geom.area) <= 1e-9 * geom.area
    assert w.area == pytest.approx(geom.area, rel=1e-15)


def test_fractions_in_unit_interval_and_whole_cells_exactly_one():
    geom = star_polygon(4)
    w = Window.from_geometry(geom)
    lat = lattice_for_window(w, cell_size=3.7)
    f = w.fraction(lat)
    assert f.shape == lat.shape
    assert f.min() >= 0.0 and f.max() <= 1.0
    # a cell whose centre is inside and > 2 cells from the boundary lies wholly inside
    cc = lat.cell_centers()
    xy = cc[:, ::-1]  # cell_centers are in axis order (y, x)
    deep = shapely.distance(geom.boundary, shapely.points(xy)) > 2 * max(lat.spacing)
    deep &= shapely.contains_xy(geom, xy[:, 0], xy[:, 1])
    assert deep.sum() > 100
    assert np.all(f.ravel()[deep] == 1.0)


def test_boolean_raster_window():
    lat = Lattice((2, 3), spacing=(2.0, 0.5), origin=(1.0, -1.0))
    mask = np.array([[True, False, True], [False, False, True]])
    w = Window.from_raster(mask, lat)
    assert w.kind == "raster" and w.lattice is lat
    np.testing.assert_array_equal(w.exposure(lat), mask * 1.0)  # cell area 2.0 * 0.5 = 1
    assert w.area == 3.0
    # bounds: box of covered cells; x edges -1, -0.5, 0, 0.5; y edges 1, 3, 5
    assert w.bounds == ((-1.0, 0.5), (1.0, 5.0))


def test_fractional_raster_window_and_3d_broadcast():
    lat = Lattice((2, 2), spacing=(0.5, 2.0))
    frac = np.array([[0.0, 0.25], [1.0, 0.5]])
    w = Window.from_raster(frac, lat)
    np.testing.assert_allclose(w.exposure(lat), [[0.0, 0.25], [1.0, 0.5]])  # cell area 1
    assert w.area == pytest.approx(1.75)
    lat3 = Lattice((3, 2, 2), spacing=(10.0, 0.5, 2.0))
    e3 = w.exposure(lat3)
    assert e3.shape == (3, 2, 2)
    for t in range(3):
        np.testing.assert_allclose(e3[t], 10.0 * frac)


def test_raster_window_refuses_another_lattice():
    lat = Lattice((2, 2))
    w = Window.from_raster(np.ones((2, 2), bool), lat)
    with pytest.raises(ShapeMismatchError, match=r"window.lattice"):
        w.exposure(Lattice((2, 2), origin=0.5))
    with pytest.raises(ShapeMismatchError, match=r"window.lattice"):
        w.exposure(Lattice((3, 2)))


def test_interval_window_on_1d_lattice():
    # Cells [0,1], [1,2], [2,3]; interval [0.25, 2.6]: overlaps 0.75, 1, 0.6.
    w = Window.interval(0.25, 2.6)
    e = w.exposure(Lattice((3,)))
    np.testing.assert_allclose(e, [0.75, 1.0, 0.6], rtol=1e-14)
    assert w.area == pytest.approx(2.35) and w.ndim == 1 and w.bounds == ((0.25, 2.6),)


def test_3d_exposure_is_2d_times_time_spacing():
    w = Window.rectangle(0.3, 2.2, 0.5, 1.25)
    e = w.exposure(Lattice((4, 2, 3), spacing=(0.5, 1.0, 1.0)))
    assert e.shape == (4, 2, 3)
    one = 0.5 * np.array([[0.35, 0.5, 0.1], [0.175, 0.25, 0.05]])
    for t in range(4):
        np.testing.assert_allclose(e[t], one, rtol=1e-14)


def test_window_and_lattice_dimensions_must_match():
    with pytest.raises(ShapeMismatchError, match="1-D lattice"):
        Window.interval(0, 1).exposure(Lattice((2, 2)))
    with pytest.raises(ShapeMismatchError, match=r"Window.interval"):
        UNIT.exposure(Lattice((4,)))
    with pytest.raises(InvalidParameterError, match=r"not a lattice_lgm.Lattice"):
        UNIT.exposure((4, 4))


def test_window_and_lattice_crs_must_agree():
    w = Window.rectangle(0, 1, 0, 1, crs="EPSG:32617")
    with pytest.raises(InvalidParameterError, match="differs from lattice crs"):
        w.exposure(Lattice((2, 2), crs="EPSG:32618"))
    assert w.exposure(Lattice((2, 2), crs="EPSG:32617")).sum() == 1.0


# == contains ===================================================================================


def test_contains_is_closed_for_rectangles_and_intervals():
    xy = np.array([[0, 0], [1, 1], [1, 0.5], [0.5, 0], [1 + 1e-12, 0.5], [0.5, -1e-12]])
    np.testing.assert_array_equal(UNIT.contains(xy), [True] * 4 + [False] * 2)
    iv = Window.interval(2.0, 3.0)
    np.testing.assert_array_equal(iv.contains([2.0, 3.0, 2.5, 1.999, 3.001]),
                                  [True, True, True, False, False])


def test_contains_polygon_with_hole():
    geom = Polygon([(0, 0), (4, 0), (4, 4), (0, 4)], [[(1, 1), (3, 1), (3, 3), (1, 3)]])
    w = Window.from_geometry(geom)
    xy = [[2, 2], [1, 2], [3, 3], [0, 4], [4, 2], [0.5, 0.5], [5, 1], [2, 2.999]]
    np.testing.assert_array_equal(
        w.contains(xy), [False, True, True, True, True, True, False, False])


def test_contains_raster_uses_cell_fraction():
    lat = Lattice((2, 2))  # cells [0,1) and [1,2] on each axis
    w = Window.from_raster(np.array([[1.0, 0.0], [0.3, 0.0]]), lat)
    xy = [[0.5, 0.5], [1.5, 0.5], [0.5, 1.5], [0.5, 2.0], [1.0, 0.5], [-0.1, 0.5], [0.5, 2.1]]
    # (1.0, 0.5) is on the internal edge x=1: upper (empty) cell. (0.5, 2.0): top edge, closed.
    np.testing.assert_array_equal(w.contains(xy), [True, False, True, True, False, False, False])


def test_contains_refuses_bad_input():
    with pytest.raises(ShapeMismatchError, match=r"\(n, 2\)"):
        UNIT.contains(np.zeros((3, 3)))
    with pytest.raises(InvalidDataError, match="point index 1"):
        UNIT.contains([[0.1, 0.1], [np.nan, 0.2]])


# == window constructors, properties and refusals ===============================================


def test_rectangle_properties_and_immutability():
    w = Window.rectangle(1.0, 4.0, -2.0, 0.0, crs="EPSG:32617")
    assert w.kind == "rectangle" and w.area == 6.0 and w.ndim == 2
    assert w.bounds == ((1.0, 4.0), (-2.0, 0.0)) and w.crs == "EPSG:32617"
    assert "rectangle" in repr(w) and "area=6" in repr(w)
    with pytest.raises(AttributeError, match="immutable"):
        w._rect = (0, 1, 0, 1)
    with pytest.raises(AttributeError, match="immutable"):
        del w._kind
    with pytest.raises(TypeError, match=r"Window.rectangle"):
        Window()
    assert w.to_shapely().equals(shapely.box(1.0, -2.0, 4.0, 0.0))
    (ring,) = w.outline()
    assert ring.shape == (5, 2)
    assert {tuple(p) for p in ring} == {(1, -2), (4, -2), (4, 0), (1, 0)}


@pytest.mark.parametrize(
    ("args", "match"),
    [((1.0, 1.0, 0.0, 1.0), "xmin=1.0 must be < xmax=1.0"),
     ((0.0, 1.0, 2.0, 1.0), "ymin=2.0 must be < ymax=1.0"),
     ((np.nan, 1.0, 0.0, 1.0), "xmin=nan"),
     ((0.0, np.inf, 0.0, 1.0), "xmax=inf"),
     ((0.0, 1.0, "a", 1.0), "ymin='a' is not a number")],
)
def test_rectangle_refusals(args, match):
    with pytest.raises(InvalidParameterError, match=match):
        Window.rectangle(*args)


def test_geographic_crs_refused_everywhere_strings_go():
    with pytest.raises(GeographicCoordinatesError, match=r"project first|Project first"):
        Window.rectangle(0, 1, 0, 1, crs="EPSG:4326")
    with pytest.raises(GeographicCoordinatesError):
        Window.interval(0, 1, crs="EPSG:4326")
    with pytest.raises(GeographicCoordinatesError):
        Window.from_geometry(shapely.box(0, 0, 1, 1), crs="EPSG:4326")


def test_interval_refusals():
    with pytest.raises(InvalidParameterError, match=r"a=2.0 must be < b=1.0"):
        Window.interval(2.0, 1.0)
    with pytest.raises(InvalidParameterError, match="b=nan"):
        Window.interval(0.0, np.nan)
    with pytest.raises(UnsupportedOperationError, match="1-D"):
        Window.interval(0.0, 1.0).to_shapely()
    np.testing.assert_array_equal(Window.interval(0.0, 1.0).outline()[0], [[0, 0], [1, 0]])


@pytest.mark.parametrize(
    ("geom", "match"),
    [(LineString([(0, 0), (1, 1)]), "is a LineString"),
     (Point(0, 0), "is a Point"),
     ("POLYGON", "is a str"),
     (Polygon(), "empty"),
     (Polygon([(0, 0), (1, 1), (1, 0), (0, 1)]), "Self-intersection"),
     (Polygon([(0, 0), (1, 0), (2, 0)]), "not a valid polygon"),  # zero area: invalid in GEOS
     (MultiPolygon([shapely.box(0, 0, 2, 2), shapely.box(1, 1, 3, 3)]), "not a valid")],
)
def test_from_geometry_refusals(geom, match):
    with pytest.raises(InvalidParameterError, match=match):
        Window.from_geometry(geom)


def test_polygon_properties_outline_and_pickle():
    geom = Polygon([(0, 0), (4, 0), (4, 4), (0, 4)], [[(1, 1), (3, 1), (3, 3), (1, 3)]])
    w = Window.from_geometry(geom)
    assert w.kind == "polygon" and w.area == 12.0 and w.bounds == ((0.0, 4.0), (0.0, 4.0))
    assert "holes=1" in repr(w)
    rings = w.outline()
    assert len(rings) == 2 and all(r.shape[1] == 2 for r in rings)
    assert {tuple(p) for p in rings[1]} == {(1, 1), (3, 1), (3, 3), (1, 3)}
    w2 = pickle.loads(pickle.dumps(w))
    assert w2.kind == "polygon" and w2.to_shapely().equals(geom)
    lat = Lattice((4, 4))
    np.testing.assert_array_equal(w2.exposure(lat), w.exposure(lat))


def test_raster_to_shapely_and_outline():
    lat = Lattice((2, 3))
    w = Window.from_raster(np.array([[1, 1, 0], [0.5, 0, 0]]), lat)
    g = w.to_shapely()
    # covered cells (0,0), (0,1), (1,0) form an L of area 3 (partial cells count whole)
    assert g.area == 3.0 and g.equals(shapely.union_all(
        [shapely.box(0, 0, 2, 1), shapely.box(0, 1, 1, 2)]))
    assert len(w.outline()) == 1
    assert w.area == 2.5 and "raster" in repr(w)


def gpd():
    """geopandas (the optional "geo" extra), or skip."""
    return pytest.importorskip("geopandas")


def test_from_geodataframe_union_and_crs():
    g = gpd()
    frame = g.GeoDataFrame(geometry=[shapely.box(0, 0, 2, 1), shapely.box(1, 0, 3, 1)],
                           crs="EPSG:32617")
    w = Window.from_geodataframe(frame)
    assert w.kind == "polygon" and w.area == pytest.approx(3.0)  # overlap counted once
    assert isinstance(w.crs, str) and "32617" in w.crs
    assert Window.from_geodataframe(frame.geometry).area == pytest.approx(3.0)
    assert Window.coerce(frame).area == pytest.approx(3.0)


def test_from_geodataframe_refusals():
    g = gpd()
    with pytest.raises(GeographicCoordinatesError, match="Project first"):
        Window.from_geodataframe(g.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1)],
                                                crs="EPSG:4326"))
    with pytest.raises(InvalidParameterError, match="no rows"):
        Window.from_geodataframe(g.GeoDataFrame(geometry=[], crs="EPSG:32617"))
    with pytest.raises(InvalidParameterError, match=r"row 1 .* Point"):
        Window.from_geodataframe(g.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1), Point(0, 0)]))
    with pytest.raises(InvalidParameterError, match=r"row 0 .* NoneType"):
        Window.from_geodataframe(g.GeoDataFrame(geometry=[None, shapely.box(0, 0, 1, 1)]))
    bowtie = Polygon([(0, 0), (1, 1), (1, 0), (0, 1)])
    with pytest.raises(InvalidParameterError, match=r"row 0 .*Self-intersection"):
        Window.from_geodataframe(g.GeoDataFrame(geometry=[bowtie]))
    with pytest.raises(InvalidParameterError, match="GeoDataFrame or GeoSeries"):
        Window.from_geodataframe([shapely.box(0, 0, 1, 1)])


@pytest.mark.parametrize(
    ("mask", "exc", "match"),
    [(np.ones((3, 2)), ShapeMismatchError, r"shape \(3, 2\)"),
     (np.array([[0.0, 0.5], [1.5, 1.0]]), InvalidParameterError, r"1.5 at index \(1, 0\)"),
     (np.array([[0.0, -0.1], [1.0, 1.0]]), InvalidParameterError, r"-0.1 at index \(0, 1\)"),
     (np.array([[0.0, 0.5], [1.0, np.nan]]), InvalidParameterError, r"nan at index \(1, 1\)"),
     (np.zeros((2, 2)), InvalidParameterError, "zero area"),
     (np.array([["a", "b"], ["c", "d"]]), InvalidParameterError, "dtype")],
)
def test_from_raster_refusals(mask, exc, match):
    with pytest.raises(exc, match=match):
        Window.from_raster(mask, Lattice((2, 2)))


def test_from_raster_refuses_non_2d_lattices():
    with pytest.raises(ShapeMismatchError, match="2-D"):
        Window.from_raster(np.ones((2, 2, 2)), Lattice((2, 2, 2)))
    with pytest.raises(InvalidParameterError, match="Lattice"):
        Window.from_raster(np.ones((2, 2)), (2, 2))


def test_raster_mask_is_copied_and_read_only():
    mask = np.ones((2, 2))
    w = Window.from_raster(mask, Lattice((2, 2)))
    mask[0, 0] = 0.0
    assert w.area == 4.0
    e = w.exposure(Lattice((2, 2)))
    e[0, 0] = 99.0  # the returned array is the caller's
    assert w.area == 4.0


def test_coerce_dispatch_and_refusals():
    assert Window.coerce(UNIT) is UNIT
    assert Window.coerce((0, 2, 0, 3)).area == 6.0
    assert Window.coerce([0.0, 2.0]).kind == "interval"
    assert Window.coerce(shapely.box(0, 0, 1, 2)).kind == "polygon"
    lat = Lattice((2, 2))
    assert Window.coerce(np.eye(2, dtype=bool), lattice=lat).kind == "raster"
    with pytest.raises(InvalidParameterError, match="no lattice was given"):
        Window.coerce(np.eye(2, dtype=bool))
    for bad in ("unit square", {"xmin": 0}, (0, 1, 2), (0, 1, "a", 2), (True, False), None):
        with pytest.raises(InvalidParameterError, match="accepted: a Window; a shapely"):
            Window.coerce(bad)


class _HasShapely:
    """A window of another library: anything with ``to_shapely()``."""

    def to_shapely(self):
        return shapely.box(0, 0, 1, 2)


def test_coerce_takes_bounds_arrays_and_window_likes_and_names_the_argument():
    assert Window.coerce(np.array([0.0, 2.0, 0.0, 3.0])).area == 6.0  # bounds, not a mask
    w = Window.coerce(_HasShapely())
    assert w.kind == "polygon" and w.area == 2.0
    with pytest.raises(InvalidParameterError, match=r"region=\(1, 0, 0, 1\): xmin=1.0 must be <"):
        Window.coerce((1, 0, 0, 1), name="region")
    with pytest.raises(InvalidParameterError, match="region is a LineString"):
        Window.coerce(LineString([(0, 0), (1, 1)]), name="region")
    with pytest.raises(InvalidParameterError, match=r"region='x' of type str is not a window"):
        Window.coerce("x", name="region")


def test_sides_and_is_box():
    assert Window.rectangle(1.0, 4.0, -2.0, 0.0).sides == (3.0, 2.0)
    assert Window.interval(1.0, 4.0).sides == (3.0,)
    assert UNIT.is_box and Window.interval(0.0, 1.0).is_box
    assert Window.from_geometry(shapely.box(0, 0, 2, 1)).is_box  # a polygon that is its box
    ell = Polygon([(0, 0), (1, 0), (1, 0.5), (0.5, 0.5), (0.5, 1), (0, 1)])
    assert not Window.from_geometry(ell).is_box
    assert not Window.from_geometry(shapely.box(0, 0, 3, 3).difference(
        shapely.box(1, 1, 2, 2))).is_box  # a hole
    lat = Lattice((2, 2))
    assert Window.from_raster(np.ones((2, 2)), lat).is_box
    assert not Window.from_raster(np.array([[1.0, 0.5], [1.0, 1.0]]), lat).is_box
    assert not Window.from_raster(np.eye(2, dtype=bool), lat).is_box


# == lattice_for_window =========================================================================


def test_lattice_for_window_cell_size_ceil_and_origin():
    w = Window.rectangle(10.0, 11.0, -3.0, -1.0)
    lat = lattice_for_window(w, cell_size=0.3, units="m")
    # x: 1 / 0.3 -> 4 cells; y: 2 / 0.3 -> 7 cells; origin at (ymin, xmin)
    assert lat.shape == (7, 4) and lat.spacing == (0.3, 0.3)
    assert lat.origin == (-3.0, 10.0) and lat.units == "m" and lat.dims == ("y", "x")
    ext = lat.extent
    assert ext[0][1] >= -1.0 and ext[1][1] >= 11.0


def test_lattice_for_window_per_axis_order_is_y_x():
    lat = lattice_for_window(Window.rectangle(0, 10, 0, 4), cell_size=(1.0, 2.5))
    assert lat.shape == (4, 4) and lat.spacing == (1.0, 2.5)


def test_lattice_for_window_snaps_round_off_ratios():
    # 2.1 / 0.3 = 7.000000000000001 in floating point: 7 cells, not 8
    assert 2.1 / 0.3 > 7
    lat = lattice_for_window(Window.rectangle(0.0, 2.1, 0.0, 0.6), cell_size=0.3)
    assert lat.shape == (2, 7)
    # a genuine remainder still rounds up
    wider = Window.rectangle(0.0, 2.1001, 0.0, 0.6)
    assert lattice_for_window(wider, cell_size=0.3).shape == (2, 8)


def test_lattice_for_window_shape_and_interval_and_crs():
    w = Window.rectangle(0, 1000, 0, 500, crs="EPSG:32617")
    lat = lattice_for_window(w, shape=(100, 400))
    assert lat.spacing == (5.0, 2.5) and lat.crs == "EPSG:32617"
    assert lattice_for_window(w, shape=50).shape == (50, 50)
    lat1 = lattice_for_window(Window.interval(2.0, 7.0), cell_size=2.0, dims=("s",))
    assert lat1.shape == (3,) and lat1.origin == (2.0,) and lat1.dims == ("s",)
    assert lattice_for_window((0, 1, 0, 1), shape=2).shape == (2, 2)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [({}, InvalidParameterError, "exactly one of"),
     ({"cell_size": 1.0, "shape": 3}, InvalidParameterError, "exactly one of"),
     ({"cell_size": 0.0}, InvalidParameterError, "cell_size=0.0"),
     ({"cell_size": -1.0}, InvalidParameterError, "cell_size=-1.0"),
     ({"cell_size": np.nan}, InvalidParameterError, "cell_size=nan"),
     ({"cell_size": (1.0, np.inf)}, InvalidParameterError, r"cell_size\[1\]=inf"),
     ({"cell_size": (1.0, 1.0, 1.0)}, ShapeMismatchError, "3 entries"),
     ({"shape": 0}, InvalidParameterError, "entry 0"),
     ({"shape": (2, 2.5)}, InvalidParameterError, "entry 2.5"),
     ({"shape": True}, InvalidParameterError, "entry True"),
     ({"shape": (1, 2, 3)}, ShapeMismatchError, "3 entries"),
     ({"cell_size": 1.0, "crs": "EPSG:32618"}, InvalidParameterError, "differs from"),
     ({"cell_size": 1.0, "crs": "EPSG:4326"}, GeographicCoordinatesError, "Project first")],
)
def test_lattice_for_window_refusals(kwargs, exc, match):
    w = Window.rectangle(0, 4, 0, 2, crs="EPSG:32617")
    with pytest.raises(exc, match=match):
        lattice_for_window(w, **kwargs)


# == binning: lansing ===========================================================================


def test_lansing_every_point_binned_matches_histogram2d():
    xy = lansing_xy()
    assert xy.shape == (2251, 2)
    lat = lattice_for_window(UNIT, cell_size=0.1)
    assert lat.shape == (10, 10)
    with pytest.warns(UserWarning, match="1 point.* same coordinates"):
        b = bin_points(LANSING, lat, UNIT)
    assert b.n_points == b.total == int(b.counts.sum()) == 2251
    assert b.n_dropped == 0 and b.n_moved == 0 and b.n_duplicates == 1
    assert b.counts.dtype == np.int64 and b.counts.shape == (10, 10)
    # independent oracle: numpy's histogram (half-open bins, last closed) on the same edges
    edges = 0.0 + np.arange(11) * 0.1
    h, _, _ = np.histogram2d(xy[:, 1], xy[:, 0], bins=[edges, edges])
    np.testing.assert_array_equal(b.counts, h.astype(np.int64))
    np.testing.assert_array_equal(b.exposure, np.full((10, 10), lat.cell_volume))


def test_lansing_point_on_x_equal_one_is_inside_and_in_last_column():
    xy = lansing_xy()
    (idx,) = np.flatnonzero(xy[:, 0] == 1.0)
    assert idx == 705 and xy[idx, 1] == 0.199  # see tests/data/README.md
    assert UNIT.contains(xy[[idx]])[0]
    lat = Lattice((8, 8), spacing=0.125)  # dyadic: edges exact
    b = bin_points(xy[[idx]], lat, UNIT)
    expected = np.zeros((8, 8), dtype=np.int64)
    expected[1, 7] = 1  # y = 0.199 in [0.125, 0.25); x = 1.0 on the top edge -> last column
    np.testing.assert_array_equal(b.counts, expected)
    # the three points on y = 0 are in the first row
    with pytest.warns(UserWarning, match="same coordinates"):
        full = bin_points(xy, lat, UNIT)
    h, _, _ = np.histogram2d(xy[:, 1], xy[:, 0], bins=[np.arange(9) / 8, np.arange(9) / 8])
    np.testing.assert_array_equal(full.counts, h.astype(np.int64))


def test_lansing_input_types_give_identical_counts():
    import pandas as pd
    g = gpd()
    xy = lansing_xy()
    lat = lattice_for_window(UNIT, shape=(7, 9))
    frame = pd.read_csv(LANSING)
    inputs = {
        "csv str": str(LANSING),
        "csv path": LANSING,
        "array": xy,
        "list": xy.tolist(),
        "dataframe": frame,
        "dict": {"x": xy[:, 0], "y": xy[:, 1]},
        "geodataframe": g.GeoDataFrame(frame, geometry=g.points_from_xy(frame.x, frame.y)),
        "geoseries": g.GeoSeries(g.points_from_xy(xy[:, 0], xy[:, 1])),
    }
    results = {}
    for name, obj in inputs.items():
        with pytest.warns(UserWarning, match="same coordinates"):
            results[name] = bin_points(obj, lat, UNIT).counts
    for name, counts in results.items():
        np.testing.assert_array_equal(counts, results["array"], err_msg=name)
    np.testing.assert_array_equal(read_points(LANSING), xy)
    np.testing.assert_array_equal(read_points(frame, columns=["y", "x"]), xy[:, ::-1])


def test_lansing_moved_point_when_window_edge_is_a_cell_edge():
    # Lattice [0, 1.25]^2 in 0.25-cells: the window edge x = 1 is an internal cell edge, so
    # x = 1.0 falls in cell [1, 1.25) whose exposure is 0; it must go to [0.75, 1).
    xy = lansing_xy()
    lat = Lattice((5, 5), spacing=0.25)
    with pytest.warns(UserWarning) as rec:
        b = bin_points(xy, lat, UNIT)
    msgs = " ".join(str(r.message) for r in rec)
    assert "moved 1 point" in msgs and "[705]" in msgs
    assert b.n_moved == 1 and list(b.moved_index) == [705]
    assert b.total == 2251
    assert b.counts[:, 4].sum() == 0 and b.counts[4, :].sum() == 0
    assert b.exposure[:, 4].sum() == 0.0
    h, _, _ = np.histogram2d(xy[:, 1], xy[:, 0], bins=[np.arange(5) / 4, np.arange(5) / 4])
    np.testing.assert_array_equal(b.counts[:4, :4], h.astype(np.int64))


# == binning: edges, outside, duplicates, refusals ===============================================


def test_points_on_internal_edges_go_to_the_upper_cell():
    lat = Lattice((4, 4), spacing=0.25)
    b = bin_points(np.array([[0.25, 0.5], [0.75, 0.0], [0.0, 0.75]]), lat, UNIT)
    expected = np.zeros((4, 4), dtype=np.int64)
    expected[2, 1] = expected[0, 3] = expected[3, 0] = 1
    np.testing.assert_array_equal(b.counts, expected)


def test_edges_are_honoured_where_floor_rounds_the_wrong_way():
    # With origin 0.3 and spacing 0.1, edge e_k = 0.3 + k*0.1 gives floor((e_k - 0.3)/0.1) != k
    # for these k: the point exactly on edge e_k must still land in cell k.
    o, h, n = 0.3, 0.1, 30
    e = o + np.arange(n + 1) * h
    ks = [k for k in range(1, n) if np.floor((e[k] - o) / h) != k]
    assert len(ks) >= 3
    lat = Lattice((n,), spacing=h, origin=o)
    b = bin_points(e[ks], lat)
    expected = np.zeros(n, dtype=np.int64)
    expected[ks] = 1
    np.testing.assert_array_equal(b.counts, expected)
    # and a point just below each such edge stays in cell k - 1
    below = np.nextafter(e[ks], -np.inf)
    expected = np.zeros(n, dtype=np.int64)
    expected[np.array(ks) - 1] = 1
    np.testing.assert_array_equal(bin_points(below, lat).counts, expected)


def test_points_on_the_upper_lattice_edge_go_to_the_last_cell():
    lat = Lattice((4, 4), spacing=0.25)
    b = bin_points([[1.0, 1.0], [1.0, 0.1], [0.1, 1.0]], lat)
    assert b.counts[3, 3] == 1 and b.counts[0, 3] == 1 and b.counts[3, 0] == 1
    assert b.total == 3 and b.window is None


def test_upper_edge_round_off_is_binned_but_farther_is_an_error():
    # 0.9 / 3 = 0.3 and 3 * 0.3 = 0.8999999999999999 < 0.9: the lattice's top is one ulp below
    # the window's edge, so a point on the window edge is inside the window, 1 ulp past the
    # lattice: round-off, binned in the last cell.
    w = Window.interval(0.0, 0.9)
    lat = lattice_for_window(w, shape=3)
    assert lat.extent[0][1] < 0.9
    b = bin_points(np.array([0.9]), lat, w)
    np.testing.assert_array_equal(b.counts, [0, 0, 1])
    # a window reaching past the lattice by more than round-off: its points there are an error
    with pytest.raises(InvalidDataError, match=r"2 points inside the window lie outside the "
                                               r"lattice .* \[1, 2\]"):
        bin_points(np.array([0.5, 0.9 + 1e-9, 1.2]), lat, Window.interval(0.0, 1.5))


def test_outside_raise_names_count_and_first_five_indices():
    xy = np.array([[0.5, 0.5]] * 3 + [[1.5, 0.5]] * 6 + [[0.5, -0.1]])
    with pytest.raises(InvalidDataError,
                       match=r"7 of 10 points lie outside the window \(first indices "
                             r"\[3, 4, 5, 6, 7, …\]\).*outside='drop'"):
        bin_points(xy, Lattice((2, 2), spacing=0.5), UNIT)


def test_outside_drop_warns_and_reports_indices():
    xy = np.array([[0.5, 0.5], [1.5, 0.5], [0.2, 0.7], [0.5, -0.1]])
    with pytest.warns(UserWarning, match="dropped 2 of 4 points"):
        b = bin_points(xy, Lattice((2, 2), spacing=0.5), UNIT, outside="drop")
    assert b.n_dropped == 2 and list(b.dropped_index) == [1, 3]
    assert b.n_points == b.total == 2
    assert b.counts[1, 1] == 1 and b.counts[1, 0] == 1


def test_outside_refuses_unknown_policy():
    with pytest.raises(InvalidParameterError, match="outside='clip'"):
        bin_points(np.zeros((1, 2)), Lattice((2, 2)), outside="clip")


def test_no_window_means_the_lattice_extent():
    lat = Lattice((2, 2), origin=(1.0, 1.0))
    with pytest.raises(InvalidDataError, match="1 of 2 points lie outside"):
        bin_points([[1.5, 1.5], [0.5, 1.5]], lat)


def test_duplicates_are_kept_and_counted():
    xy = np.array([[0.1, 0.1], [0.6, 0.6], [0.1, 0.1], [0.1, 0.1], [0.6, 0.6], [0.6, 0.1]])
    with pytest.warns(UserWarning, match="3 point"):
        b = bin_points(xy, Lattice((2, 2), spacing=0.5), UNIT)
    assert b.n_duplicates == 3 and b.total == 6
    np.testing.assert_array_equal(b.counts, [[3, 1], [0, 2]])


def test_clean_input_raises_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = bin_points([[0.1, 0.2], [0.9, 0.4]], Lattice((2, 2), spacing=0.5), UNIT)
    assert b.n_duplicates == b.n_moved == b.n_dropped == 0


def test_nan_and_inf_coordinates_refused_naming_the_index():
    lat = Lattice((2, 2), spacing=0.5)
    with pytest.raises(InvalidDataError, match=r"nan at point index 2 \(column 1\)"):
        bin_points([[0.1, 0.1], [0.2, 0.2], [0.3, np.nan]], lat, UNIT)
    with pytest.raises(InvalidDataError, match="inf at point index 0"):
        bin_points({"x": [np.inf], "y": [0.5]}, lat, UNIT)


def test_points_in_a_hole_are_outside():
    geom = Polygon([(0, 0), (4, 0), (4, 4), (0, 4)], [[(1, 1), (3, 1), (3, 3), (1, 3)]])
    w = Window.from_geometry(geom)
    lat = Lattice((4, 4))
    with pytest.raises(InvalidDataError, match=r"1 of 3 points .* \[1\]"):
        bin_points([[0.5, 0.5], [2.0, 2.0], [3.5, 3.5]], lat, w)
    # on the hole's edge: inside (closed window); cell [1,2)x[1,2) has exposure 0 -> moved
    with pytest.warns(UserWarning, match="moved 1 point"):
        b = bin_points([[0.5, 0.5], [2.0, 1.0]], lat, w)
    assert b.total == 2 and b.n_moved == 1
    assert b.exposure[b.counts > 0].min() > 0  # nothing counted where nothing was observable
    np.testing.assert_array_equal(b.exposure, [[1, 1, 1, 1], [1, 0, 0, 1], [1, 0, 0, 1],
                                               [1, 1, 1, 1]])


def test_points_shape_columns_and_type_refusals(tmp_path):
    lat = Lattice((2, 2), spacing=0.5)
    with pytest.raises(ShapeMismatchError, match=r"\(n, 2\) in \(x, y\) order"):
        bin_points(np.zeros((3, 3)), lat, UNIT)
    with pytest.raises(InvalidDataError, match=r"no column\(s\) \['y'\]"):
        bin_points({"x": [0.1], "z": [0.2]}, lat, UNIT)
    with pytest.raises(InvalidDataError, match="not a file"):
        bin_points(str(tmp_path / "missing.csv"), lat, UNIT)
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n0.1,0.2\n0.3,abc\n")
    with pytest.raises(InvalidDataError, match="non-numeric value 'abc' at row 1"):
        bin_points(bad, lat, UNIT)
    with pytest.raises(InvalidParameterError, match="not understood"):
        bin_points(42, lat, UNIT)
    with pytest.raises(InvalidDataError, match="no column 'x'"):
        read_points({"a": [1.0]})
    holes = tmp_path / "holes.csv"
    holes.write_text("x,y\n0.1,0.2\n0.3,\n")
    with pytest.raises(InvalidDataError, match="nan at point index 1"):
        read_points(holes)
    with pytest.raises(InvalidParameterError, match="Lattice"):
        bin_points([[0.1, 0.1]], "lattice", UNIT)


def test_empty_point_pattern():
    b = bin_points(np.empty((0, 2)), Lattice((2, 2), spacing=0.5), UNIT)
    assert b.total == b.n_points == 0 and b.counts.shape == (2, 2)


def test_geographic_points_refused_and_crs_mismatch():
    g = gpd()
    pts = g.GeoSeries([Point(0.5, 0.5)], crs="EPSG:4326")
    with pytest.raises(GeographicCoordinatesError, match="Project first"):
        bin_points(pts, Lattice((2, 2)))
    pts = g.GeoSeries([Point(0.5, 0.5)], crs="EPSG:32617")
    with pytest.raises(InvalidDataError, match="differs from lattice crs"):
        bin_points(pts, Lattice((2, 2), crs="EPSG:32618"))
    b = bin_points(pts, Lattice((2, 2), crs="EPSG:32617"))
    assert b.counts[0, 0] == 1
    with pytest.raises(InvalidDataError, match=r"row 1 .* Point"):
        bin_points(g.GeoSeries([Point(0, 0), shapely.box(0, 0, 1, 1)]), Lattice((2, 2)))


def test_binned_points_is_frozen_and_read_only():
    b = bin_points([[0.1, 0.1]], Lattice((2, 2), spacing=0.5), UNIT)
    assert isinstance(b, BinnedPoints)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.n_points = 3
    with pytest.raises(ValueError, match="read-only"):
        b.counts[0, 0] = 5
    with pytest.raises(AssertionError, match="lost or invented"):
        dataclasses.replace(b, n_points=2)


def test_raster_window_binning():
    lat = Lattice((2, 2))
    w = Window.from_raster(np.array([[1.0, 0.0], [0.5, 1.0]]), lat)
    with pytest.raises(InvalidDataError, match=r"1 of 3 points .* \[1\]"):
        bin_points([[0.5, 0.5], [1.5, 0.5], [0.5, 1.5]], lat, w)
    b = bin_points([[0.5, 0.5], [0.5, 1.5], [2.0, 2.0]], lat, w)
    np.testing.assert_array_equal(b.counts, [[1, 0], [1, 1]])
    np.testing.assert_array_equal(b.exposure, [[1.0, 0.0], [0.5, 1.0]])
    # an array mask is coerced with the binning lattice
    b2 = bin_points([[0.5, 0.5]], lat, np.array([[True, False], [False, False]]))
    assert b2.window.kind == "raster" and b2.total == 1


# == binning in 1-D and 3-D =====================================================================


def test_coal_mining_50_day_bins_against_integer_division():
    with (DATA / "coal_mining_disasters.csv").open() as fh:
        days = [int(r["days_since_1851_03_15"]) for r in csv.DictReader(fh)]
    days = np.array(days)
    w = Window.interval(0.0, float(days.max()))
    lat = lattice_for_window(w, cell_size=50.0, dims=("t",))
    assert lat.shape == (811,)  # ceil(40549 / 50), as the data README states
    with pytest.warns(UserWarning, match="1 point.* same coordinates"):  # 1875-12-06 twice
        b = bin_points(days.astype(float), lat, w)
    expected = np.bincount(days // 50, minlength=811)
    np.testing.assert_array_equal(b.counts, expected)
    assert b.total == 191 and b.counts.max() == 4
    # the last bin [40500, 40550) is cut by the window at 40549: exposure 49
    assert b.exposure[-1] == 49.0 and b.exposure[0] == 50.0
    # a 1-D table input works through the dims name
    with pytest.warns(UserWarning, match="same coordinates"):
        b2 = bin_points({"t": days}, lat, w)
    np.testing.assert_array_equal(b2.counts, expected)


def test_space_time_binning():
    lat = Lattice((3, 2, 2), spacing=(1.0, 0.5, 0.5))  # t in [0, 3], y, x in [0, 1]
    pts = np.array([[0.1, 0.1, 0.0], [0.9, 0.1, 3.0], [0.6, 0.6, 1.0], [0.6, 0.6, 1.0]])
    with pytest.warns(UserWarning, match="same coordinates"):
        b = bin_points(pts, lat, UNIT)
    expected = np.zeros((3, 2, 2), dtype=np.int64)
    expected[0, 0, 0] = 1  # t = 0
    expected[2, 0, 1] = 1  # t = 3 is the closed top of the time axis
    expected[1, 1, 1] = 2  # t = 1 is an internal edge: upper cell
    np.testing.assert_array_equal(b.counts, expected)
    np.testing.assert_allclose(b.exposure, np.full((3, 2, 2), 0.25))
    import pandas as pd
    frame = pd.DataFrame({"t": pts[:, 2], "x": pts[:, 0], "y": pts[:, 1]})
    with pytest.warns(UserWarning, match="same coordinates"):
        np.testing.assert_array_equal(bin_points(frame, lat, UNIT).counts, expected)
    with pytest.raises(InvalidDataError, match=r"1 of 2 points .* \[1\]"):
        bin_points([[0.5, 0.5, 1.0], [0.5, 0.5, 3.5]], lat, UNIT)


def test_every_error_is_a_lattice_lgm_error():
    for exc in (InvalidDataError, InvalidParameterError, ShapeMismatchError,
                GeographicCoordinatesError, UnsupportedOperationError):
        assert issubclass(exc, LatticeLGMError)
