"""Covariates: regridding against hand-computed cases, readers, formula, design matrix, refusals.

Every expected value below is computed by hand (in the comments) or by an independent
expression (block sums with slicing, the CSV read with the csv module); none re-runs the
implementation.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from lattice_lgm import Lattice
from lattice_lgm.covariates import (
    DesignMatrix,
    Factor,
    Term,
    build_design,
    from_table,
    parse_formula,
    read_raster,
    regrid,
)
from lattice_lgm.errors import (
    GeographicCoordinatesError,
    InvalidDataError,
    InvalidParameterError,
    LatticeLGMError,
    ShapeMismatchError,
    UnsupportedOperationError,
)

BEI = Path(__file__).resolve().parents[2] / "data" / "bei_covariates.csv"


def grid(values, y=None, x=None, **attrs):
    """A (y, x) DataArray with unit cells centred at k + 0.5 unless coordinates are given."""
    v = np.asarray(values, dtype=float)
    y = np.arange(v.shape[0]) + 0.5 if y is None else np.asarray(y, dtype=float)
    x = np.arange(v.shape[1]) + 0.5 if x is None else np.asarray(x, dtype=float)
    return xr.DataArray(v, dims=("y", "x"), coords={"y": y, "x": x}, attrs=attrs)


# -- area: hand-computed cases ------------------------------------------------------------------


def test_area_block_means_4x4_to_2x2():
    src = grid(np.arange(16.0).reshape(4, 4))
    out = regrid(src, Lattice((2, 2), spacing=2.0))
    # blocks {0,1,4,5}, {2,3,6,7}, {8,9,12,13}, {10,11,14,15}
    np.testing.assert_allclose(out.values, [[2.5, 4.5], [10.5, 12.5]], rtol=0, atol=1e-12)
    assert out.dims == ("y", "x")
    np.testing.assert_array_equal(out["y"], [1.0, 3.0])
    np.testing.assert_array_equal(out["x"], [1.0, 3.0])
    assert out.attrs["regrid_method"] == "area"
    assert out.attrs["source_spacing"] == (1.0, 1.0)
    assert out.attrs["source_extent"] == (0.0, 4.0, 0.0, 4.0)
    assert out.attrs["flipped_dims"] == ""
    assert out.dtype == np.float64


def test_area_source_offset_by_half_a_cell():
    # Source unit cells centred at 0..4 (edges -0.5, 0.5, …, 4.5); target cells of 2 from 0.
    # Target [0, 2) meets sources centred 0, 1, 2 by 0.5, 1, 0.5 → weights 1/4, 1/2, 1/4 per
    # axis; target [2, 4) meets 2, 3, 4 likewise.  With spikes v[0,0]=16, v[1,1]=32, v[2,2]=64,
    # v[1,3]=8:
    #   out[0,0] = 16·(1/4)(1/4) + 32·(1/2)(1/2) + 64·(1/4)(1/4) = 1 + 8 + 4 = 13
    #   out[0,1] = 8·(1/2)(1/2) + 64·(1/4)(1/4) = 2 + 4 = 6
    #   out[1,0] = out[1,1] = 64·(1/4)(1/4) = 4
    v = np.zeros((5, 5))
    v[0, 0], v[1, 1], v[2, 2], v[1, 3] = 16, 32, 64, 8
    src = grid(v, y=np.arange(5.0), x=np.arange(5.0))
    out = regrid(src, Lattice((2, 2), spacing=2.0))
    np.testing.assert_allclose(out.values, [[13.0, 6.0], [4.0, 4.0]], rtol=0, atol=1e-12)


def test_area_finer_target_reproduces_piecewise_constant():
    v = np.array([[1.0, 2.0], [3.0, 5.0]])
    src = grid(v, y=[1.0, 3.0], x=[1.0, 3.0])  # cells of 2
    out = regrid(src, Lattice((4, 4), spacing=1.0))
    np.testing.assert_array_equal(out.values, np.kron(v, np.ones((2, 2))))


def test_area_finer_target_straddling_a_source_edge_1d():
    # 1-D: source cells [0,2) = 1, [2,4) = 3; targets of 0.5 from 0.25: [1.75, 2.25) is half
    # and half → 2; the others lie in one source cell.
    src = xr.DataArray([1.0, 3.0], dims=("x",), coords={"x": [1.0, 3.0]})
    out = regrid(src, Lattice((7,), spacing=0.5, origin=0.25))
    np.testing.assert_allclose(out.values, [1, 1, 1, 2, 3, 3, 3], rtol=0, atol=1e-12)


def test_area_3d_block_mean():
    v = np.arange(8.0).reshape(2, 2, 2)
    src = xr.DataArray(v, dims=("t", "y", "x"),
                       coords={"t": [0.5, 1.5], "y": [0.5, 1.5], "x": [0.5, 1.5]})
    out = regrid(src, Lattice((1, 1, 1), spacing=2.0))
    assert out.values.item() == pytest.approx(3.5, abs=1e-12)  # mean of 0..7


def test_area_nan_source_cells_carry_no_weight():
    v = np.arange(16.0).reshape(4, 4)
    v[0, 0] = np.nan
    src = grid(v)
    lat = Lattice((2, 2), spacing=2.0)
    # by default a partly covered cell is refused, naming it
    with pytest.raises(InvalidDataError, match=r"1 lattice cells.*index \(0, 0\).*allow_partial"):
        regrid(src, lat)
    out = regrid(src, lat, allow_partial=True)
    # cell (0,0): mean of the non-NaN 1, 4, 5 = 10/3 (weights 1/3 each, not 1/4)
    np.testing.assert_allclose(out.values, [[10 / 3, 4.5], [10.5, 12.5]], rtol=0, atol=1e-12)
    assert out.attrs["partial_cells"] == 1
    # masking the cell instead: NaN there, exact block means elsewhere
    inside = np.array([[False, True], [True, True]])
    out = regrid(src, lat, inside=inside)
    assert np.isnan(out.values[0, 0])
    np.testing.assert_allclose(out.values[inside], [4.5, 10.5, 12.5], rtol=0, atol=1e-12)


def test_area_nan_in_a_finer_to_coarser_overlap_is_excluded():
    # Source unit cells, two rows [0, nan, 2, 6] and [1, 1, 1, 1]; the target cell [0,1) × [0,4)
    # sees row 0 only; with allow_partial → (0 + 2 + 6) / 3.
    src = grid([[0.0, np.nan, 2.0, 6.0], [1.0, 1.0, 1.0, 1.0]])
    out = regrid(src, Lattice((1, 1), spacing=(1.0, 4.0)), allow_partial=True)
    assert out.values.item() == pytest.approx(8 / 3, abs=1e-12)


def test_area_preserves_the_total_when_target_tiles_source():
    rng = np.random.default_rng(20240611)
    # source: 6 × 9 cells of 1 × 0.5 over [0, 6] × [0, 4.5]; target 4 × 3 cells of 1.5 × 1.5
    v = rng.normal(size=(6, 9))
    src = grid(v, y=np.arange(6) + 0.5, x=(np.arange(9) + 0.5) * 0.5)
    out = regrid(src, Lattice((4, 3), spacing=1.5))
    assert out.values.sum() * 1.5 * 1.5 == pytest.approx(v.sum() * 1.0 * 0.5, abs=1e-12)


def test_area_identity_on_the_same_grid_and_offset_origin():
    rng = np.random.default_rng(7)
    v = rng.normal(size=(3, 5))
    src = grid(v, y=100.0 + 2.0 * np.arange(3) + 1.0, x=-50.0 + 2.0 * np.arange(5) + 1.0)
    out = regrid(src, Lattice((3, 5), spacing=2.0, origin=(100.0, -50.0)))
    np.testing.assert_allclose(out.values, v, rtol=0, atol=1e-12)


# -- nearest and majority -----------------------------------------------------------------------


def test_nearest_picks_the_cell_containing_the_centre():
    v = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    src = grid(v)  # unit cells over [0, 3]^2
    # target cells of 1.5: centres 0.75 and 2.25 lie in source cells 0 and 2
    out = regrid(src, Lattice((2, 2), spacing=1.5), method="nearest")
    np.testing.assert_array_equal(out.values, [[1, 3], [7, 9]])
    assert out.attrs["regrid_method"] == "nearest"


def test_nearest_tie_on_a_shared_edge_goes_to_the_upper_cell():
    # target centre at 1.0 is exactly the edge between source cells [0,1) and [1,2): upper wins
    src = grid([[1, 2], [3, 4]])
    out = regrid(src, Lattice((1, 1), spacing=2.0), method="nearest")
    assert out.values.item() == 4
    # the same with coordinates that are not exact in binary: source centres 0.13, 0.23 (edge
    # at 0.18), target [0.08, 0.28) with centre 0.18; in floating point the centre lands at
    # 0.9999999999999999 source cells from the lower edge, which must still count as the edge
    src = grid([[1, 2], [3, 4]], y=[0.13, 0.23], x=[0.13, 0.23])
    out = regrid(src, Lattice((1, 1), spacing=0.2, origin=0.08), method="nearest")
    assert out.values.item() == 4


def test_majority_on_blocks_with_ties_to_the_smallest_category():
    v = np.array([
        [1, 1, 2, 3],
        [2, 3, 3, 2],
        [5, 5, 7, 4],
        [5, 4, 9, 8],
    ])
    out = regrid(grid(v), Lattice((2, 2), spacing=2.0), method="majority")
    # (0,0): 1 covers 2 of 4 → 1; (0,1): 2 and 3 cover 2 each → tie → 2;
    # (1,0): 5 covers 3 → 5; (1,1): 7, 4, 9, 8 one each → tie → 4
    np.testing.assert_array_equal(out.values, [[1, 2], [5, 4]])


def test_majority_weighs_partial_overlaps_unlike_nearest():
    # target [0, 1.5)^2 over unit cells: (0,0) area 1, (0,1) and (1,0) 0.5 each, (1,1) 0.25.
    # codes: (0,0)=3, others 1 → area of 1 = 1.25 > 1 → majority 1; nearest (centre 0.75) → 3
    v = np.array([[3, 1], [1, 1]])
    lat = Lattice((1, 1), spacing=1.5)
    assert regrid(grid(v), lat, method="majority").values.item() == 1
    assert regrid(grid(v), lat, method="nearest").values.item() == 3


def test_majority_ignores_nan_and_refuses_continuous_looking_data():
    v = np.array([[2.0, 2.0], [1.0, np.nan]])
    # NaN source cell: coverage incomplete → refused; masking leaves nothing to compute
    with pytest.raises(InvalidDataError, match="not fully covered"):
        regrid(grid(v), Lattice((1, 1), spacing=2.0), method="majority")
    many = grid(np.arange(2002.0).reshape(2, 1001))
    with pytest.raises(InvalidDataError, match="2002 distinct values"):
        regrid(many, Lattice((1, 1), spacing=(2.0, 1001.0)), method="majority")


# -- orientation --------------------------------------------------------------------------------


def test_descending_y_equals_ascending_twin_and_is_recorded():
    rng = np.random.default_rng(3)
    asc = grid(rng.normal(size=(4, 6)))
    desc = asc.isel(y=slice(None, None, -1))  # same data, stored north to south
    lat = Lattice((2, 3), spacing=2.0)
    a, d = regrid(asc, lat), regrid(desc, lat)
    np.testing.assert_array_equal(a.values, d.values)
    assert a.attrs["flipped_dims"] == ""
    assert d.attrs["flipped_dims"] == "y"


def test_north_east_spike_ends_up_in_the_last_cell():
    # a north-up raster: row 0 is the north (largest y), last column the east
    raw = np.zeros((4, 4))
    raw[0, -1] = 100.0
    src = grid(raw, y=[3.5, 2.5, 1.5, 0.5], x=[0.5, 1.5, 2.5, 3.5])
    out = regrid(src, Lattice((2, 2), spacing=2.0))
    np.testing.assert_allclose(out.values, [[0, 0], [0, 25.0]], rtol=0, atol=1e-12)


def test_dims_in_another_order_are_transposed_and_size1_dims_dropped():
    rng = np.random.default_rng(5)
    src = grid(rng.normal(size=(4, 4)))
    lat = Lattice((2, 2), spacing=2.0)
    ref = regrid(src, lat).values
    np.testing.assert_array_equal(regrid(src.transpose("x", "y"), lat).values, ref)
    banded = src.expand_dims(band=[1])
    np.testing.assert_array_equal(regrid(banded, lat).values, ref)


# -- readers ------------------------------------------------------------------------------------


def test_read_raster_geotiff_round_trip(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    from affine import Affine

    data = np.array([[1.0, 2.0, 3.0, 4.0],
                     [5.0, -9999.0, 7.0, 8.0],
                     [9.0, 10.0, 11.0, 12.0]], dtype=np.float32)  # rows north → south
    path = tmp_path / "cov.tif"
    with rasterio.open(path, "w", driver="GTiff", height=3, width=4, count=1,
                       dtype="float32", crs="EPSG:32617", nodata=-9999.0,
                       transform=Affine(10.0, 0.0, 100.0, 0.0, -10.0, 60.0)) as dst:
        dst.write(data, 1)
    da = read_raster(path, name="elev")
    assert da.name == "elev" and da.dims == ("y", "x")
    np.testing.assert_array_equal(da["x"], [105.0, 115.0, 125.0, 135.0])
    np.testing.assert_array_equal(da["y"], [55.0, 45.0, 35.0])  # descending, as stored
    assert np.isnan(da.values[1, 1])
    np.testing.assert_array_equal(da.values[0], [1, 2, 3, 4])
    assert da.attrs["crs"] == "EPSG:32617"
    assert da.attrs["nodata"] == -9999.0

    lat = Lattice((3, 4), spacing=10.0, origin=(30.0, 100.0), crs="EPSG:32617")
    with pytest.raises(InvalidDataError, match=r"index \(1, 1\).*y=45, x=115"):
        regrid(da, lat)  # the nodata cell is inside by default
    inside = np.ones((3, 4), dtype=bool)
    inside[1, 1] = False  # lattice row 1 (y in [40, 50)) is raster row 1 as well
    out = regrid(da, lat, inside=inside)
    expected = np.flipud(data.astype(float))
    expected[1, 1] = np.nan
    np.testing.assert_array_equal(out.values, expected)
    assert out.attrs["flipped_dims"] == "y"
    assert out.attrs["source_extent"] == (30.0, 60.0, 100.0, 140.0)

    with pytest.raises(InvalidParameterError, match="band=2"):
        read_raster(path, band=2)


def test_read_raster_refuses_rotated_transform(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    from affine import Affine

    path = tmp_path / "rot.tif"
    with rasterio.open(path, "w", driver="GTiff", height=2, width=2, count=1, dtype="float64",
                       transform=Affine(10.0, 2.0, 0.0, 0.0, -10.0, 20.0)) as dst:
        dst.write(np.ones((2, 2)), 1)
    with pytest.raises(UnsupportedOperationError, match="rotated"):
        read_raster(path)


def test_read_raster_netcdf_round_trip_and_regrid_output_is_netcdf_safe(tmp_path):
    src = grid(np.arange(6.0).reshape(2, 3), units="m")
    src.name = "elev"
    path = tmp_path / "elev.nc"
    src.to_netcdf(path)
    back = read_raster(path)
    xr.testing.assert_identical(back, src)
    # the regrid output's attrs survive a netCDF round trip
    out = regrid(back, Lattice((2, 3)))
    out.to_netcdf(tmp_path / "out.nc")
    again = xr.open_dataarray(tmp_path / "out.nc")
    assert again.attrs["regrid_method"] == "area"
    np.testing.assert_array_equal(again.attrs["source_spacing"], [1.0, 1.0])
    again.close()
    # a file with several variables needs name=
    xr.Dataset({"a": src, "b": src * 2}).to_netcdf(tmp_path / "two.nc")
    with pytest.raises(InvalidParameterError, match=r"\['a', 'b'\].*name="):
        read_raster(tmp_path / "two.nc")
    np.testing.assert_array_equal(read_raster(tmp_path / "two.nc", name="b").values,
                                  2 * src.values)


def test_read_raster_refuses_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(InvalidParameterError, match="does not exist"):
        read_raster(tmp_path / "nope.tif")
    p = tmp_path / "x.csv"
    p.write_text("x,y\n")
    with pytest.raises(InvalidParameterError, match="from_table"):
        read_raster(p)


def _bei_rows():
    with BEI.open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.skipif(not BEI.exists(), reason="bei data not present")
def test_bei_from_table_and_regrid_to_5m_cells():
    rows = _bei_rows()
    elev = from_table(BEI, "elev")
    assert elev.shape == (101, 201)
    assert elev.dims == ("y", "x")
    first = rows[0]
    assert (float(first["x"]), float(first["y"])) == (0.0, 0.0)
    assert elev.sel(x=0, y=0).item() == float(first["elev"])

    lat = Lattice((100, 200), spacing=5.0, units="m")  # [0, 1000] × [0, 500]
    out = regrid(elev, lat)  # the raster covers [-2.5, 1002.5] × [-2.5, 502.5]
    assert out.attrs["source_extent"] == (-2.5, 502.5, -2.5, 1002.5)
    # cell (i=3, j=7) covers y in [15, 20), x in [35, 40): nodes y ∈ {15, 20}, x ∈ {35, 40},
    # each overlapping a quarter of the cell
    node = {(float(r["x"]), float(r["y"])): float(r["elev"]) for r in rows}
    by_hand = (node[35, 15] + node[40, 15] + node[35, 20] + node[40, 20]) / 4
    assert out.values[3, 7] == pytest.approx(by_hand, abs=1e-12)
    # every cell: the mean of its four corner nodes
    e = elev.values
    np.testing.assert_allclose(out.values, (e[:-1, :-1] + e[1:, :-1] + e[:-1, 1:] + e[1:, 1:]) / 4,
                               rtol=0, atol=1e-10)


def test_from_table_refusals():
    df = pd.DataFrame({"x": [0, 1, 0, 1], "y": [0, 0, 1, 1], "v": [1.0, 2, 3, 4]})
    da = from_table(df, "v")
    np.testing.assert_array_equal(da.values, [[1, 2], [3, 4]])
    with pytest.raises(InvalidDataError, match=r"1 rows repeat.*row 4 at \(x=1, y=1\)"):
        from_table(pd.concat([df, df.iloc[[3]]], ignore_index=True), "v")
    with pytest.raises(InvalidDataError, match=r"1 nodes are missing, the first at \(x=1, y=0\)"):
        from_table(df.drop(index=1), "v")
    with pytest.raises(InvalidParameterError, match=r"\['w'\]"):
        from_table(df, "w")
    bad = df.astype({"x": float})
    bad.loc[2, "x"] = np.nan
    with pytest.raises(InvalidDataError, match="'x' has a non-finite coordinate at row 2"):
        from_table(bad, "v")
    with pytest.raises(InvalidParameterError, match="does not exist"):
        from_table("/nonexistent/table.csv", "v")
    with pytest.raises(InvalidDataError, match="numeric node coordinates"):
        from_table(df.assign(x=["a", "b", "a", "b"]), "v")


# -- regrid refusals ----------------------------------------------------------------------------


def test_regrid_refusals_on_the_source():
    lat = Lattice((2, 2))
    src = grid(np.ones((2, 2)))
    with pytest.raises(InvalidParameterError, match="ndarray"):
        regrid(np.ones((2, 2)), lat)
    with pytest.raises(InvalidParameterError, match="lattice"):
        regrid(src, (2, 2))
    with pytest.raises(ShapeMismatchError, match=r"lacks \['x'\]"):
        regrid(src.isel(x=0), lat)
    with pytest.raises(ShapeMismatchError, match=r"extra dims \['band'\]"):
        regrid(xr.concat([src, src], dim="band"), lat)
    with pytest.raises(ShapeMismatchError, match="no coordinate for dim 'x'"):
        regrid(src.drop_vars("x"), lat)
    irregular = grid(np.ones((2, 3)), x=[0.5, 1.5, 2.7])
    with pytest.raises(InvalidDataError, match=r"coords\['x'\] is not regularly spaced.*0\.2"):
        regrid(irregular, Lattice((2, 3)))
    zigzag = grid(np.ones((2, 3)), x=[0.5, 1.5, 1.0])
    with pytest.raises(InvalidDataError, match="not regularly spaced"):
        regrid(zigzag, Lattice((2, 3)))
    with pytest.raises(InvalidDataError, match=r"1 value\(s\).*attrs\['spacing'\]"):
        regrid(grid(np.ones((2, 1))), Lattice((2, 1)))
    one_col = grid(np.ones((2, 1)))
    one_col["x"].attrs["spacing"] = 0.0
    with pytest.raises(InvalidDataError, match="finite length > 0"):
        regrid(one_col, Lattice((2, 1)))
    inf = grid([[1.0, np.inf], [1.0, 1.0]])
    with pytest.raises(InvalidDataError, match=r"infinite value inf at index \(0, 1\)"):
        regrid(inf, lat)
    text = xr.DataArray(np.array([["a", "b"], ["c", "d"]]), dims=("y", "x"),
                        coords={"y": [0.5, 1.5], "x": [0.5, 1.5]})
    with pytest.raises(InvalidDataError, match="flag_meanings"):
        regrid(text, lat)


def test_regrid_refusals_on_arguments():
    lat = Lattice((2, 2))
    src = grid(np.ones((2, 2)))
    with pytest.raises(InvalidParameterError, match="method='bilinear'"):
        regrid(src, lat, method="bilinear")
    with pytest.raises(InvalidParameterError, match="allow_partial=True needs method='area'"):
        regrid(src, lat, method="nearest", allow_partial=True)
    with pytest.raises(ShapeMismatchError, match=r"inside has shape \(3, 2\)"):
        regrid(src, lat, inside=np.ones((3, 2), dtype=bool))
    with pytest.raises(InvalidParameterError, match="inside has dtype"):
        regrid(src, lat, inside=np.ones((2, 2)))


def test_coverage_error_names_count_index_coordinates_and_remedy():
    src = grid(np.ones((2, 2)))  # covers [0, 2]^2
    lat = Lattice((2, 3))  # x up to 3
    with pytest.raises(InvalidDataError) as exc:
        regrid(src, lat)
    msg = str(exc.value)
    assert "2 lattice cells" in msg and "index (0, 2)" in msg and "y=0.5, x=2.5" in msg
    assert "Extend the raster" in msg and "inside=" in msg and "allow_partial" in msg
    inside = np.array([[True, True, False], [True, True, False]])
    out = regrid(src, lat, inside=inside)
    assert np.isnan(out.values[:, 2]).all() and (out.values[:, :2] == 1).all()
    # partial: cell x in [1.5, 3) of a lattice with spacing 1.5 is half covered → average of 1s
    # (source cells x in [0,1) = 1, [1,2) = 3): first cell (1 + 0.5·3) / 1.5, second 3
    half = regrid(grid([[1.0, 3.0], [1.0, 3.0]]), Lattice((2, 2), spacing=(1.0, 1.5)),
                  allow_partial=True)
    np.testing.assert_allclose(half.values, [[(1.0 + 0.5 * 3.0) / 1.5, 3.0]] * 2, atol=1e-12)
    assert half.attrs["partial_cells"] == 2
    # zero coverage is refused even with allow_partial
    with pytest.raises(InvalidDataError, match="have no non-NaN source coverage"):
        regrid(src, lat, allow_partial=True)


def test_crs_checks():
    pytest.importorskip("pyproj")
    import pyproj

    lat = Lattice((2, 2), crs="EPSG:32617")
    ok = grid(np.ones((2, 2)), crs=pyproj.CRS.from_epsg(32617).to_wkt())  # same, other spelling
    assert regrid(ok, lat).attrs["crs"].startswith("PROJCRS")
    with pytest.raises(InvalidDataError, match="reproject first"):
        regrid(grid(np.ones((2, 2)), crs="EPSG:32618"), lat)
    with pytest.raises(GeographicCoordinatesError, match="geographic"):
        regrid(grid(np.ones((2, 2)), crs="EPSG:4326"), Lattice((2, 2)))
    rio_style = grid(np.ones((2, 2))).assign_coords(
        spatial_ref=xr.DataArray(0, attrs={"crs_wkt": pyproj.CRS.from_epsg(32618).to_wkt()}))
    with pytest.raises(InvalidDataError, match="reproject first"):
        regrid(rio_style, lat)
    # a lattice without a CRS takes the source's as recorded
    assert regrid(grid(np.ones((2, 2)), crs="EPSG:32618"), Lattice((2, 2))).attrs["crs"] == (
        "EPSG:32618")


# -- formula ------------------------------------------------------------------------------------


def test_parse_formula_terms_in_order():
    terms = parse_formula("~ elev + grad + elev:grad + C(soil) + C(soil):elev")
    assert [t.name for t in terms] == ["elev", "grad", "elev:grad", "C(soil)", "C(soil):elev"]
    assert terms[3] == Term((Factor("soil", categorical=True),))
    assert terms[2].factors == (Factor("elev"), Factor("grad"))
    assert parse_formula("~elev") == [Term((Factor("elev"),))]
    assert parse_formula("~ 1 + elev") == [Term((Factor("elev"),))]
    assert parse_formula("~ C") == [Term((Factor("C"),))]  # a covariate called C


@pytest.mark.parametrize("f", ["~ 1", "~ 0", "~ -1", "  ~1 ", "~ - 1"])
def test_parse_formula_no_covariates(f):
    assert parse_formula(f) == []


@pytest.mark.parametrize(
    ("formula", "pos", "what"),
    [
        ("~ a*b", 3, "write a \\+ b \\+ a:b"),
        ("y ~ a", 0, "left-hand side"),
        ("a + b", 0, "must start with '~'"),
        ("", 0, "empty"),
        ("~", 1, "right-hand side is empty"),
        ("~ log(a)", 2, "function log"),
        ("~ a + a", 6, "repeats 'a'"),
        ("~ b:a + a:b", 8, "'a:b' repeats 'b:a'"),
        ("~ a:a", 3, "a appears twice"),
        ("~ a - 1", 4, "removing terms"),
        ("~ 0 + a", 2, "number '0'"),
        ("~ 2", 2, "number '2'"),
        ("~ a +", 5, "after '\\+'"),
        ("~ C(a", 5, "expected '\\)'"),
        ("~ C(a:b)", 5, "expected '\\)'"),
        ("~ C()", 4, "one covariate name"),
        ("~ a ^ 2", 4, "unsupported token '\\^'"),
        ("~ a + $b", 6, "unsupported token '\\$'"),
        ("~ a:1", 4, "'1' cannot be part"),
        ("~ I(a)", 2, "function I"),
    ],
)
def test_parse_formula_errors_point_at_the_token(formula, pos, what):
    with pytest.raises(InvalidParameterError, match=what) as exc:
        parse_formula(formula)
    msg = str(exc.value)
    assert f"position {pos}:" in msg
    # the caret line sits under the offending character
    lines = msg.splitlines()
    assert lines[2].index("^") - 4 == pos


def test_parse_formula_refuses_non_string():
    with pytest.raises(InvalidParameterError, match="must be a string"):
        parse_formula(["elev"])


# -- design matrix ------------------------------------------------------------------------------


@pytest.fixture
def two_covariates():
    rng = np.random.default_rng(11)
    a = rng.normal(10.0, 3.0, size=(3, 4))
    b = rng.gamma(2.0, 1.0, size=(3, 4))
    return a, b, {"a": grid(a), "b": grid(b)}, Lattice((3, 4))


def test_build_design_centres_scales_and_forms_interactions_unscaled(two_covariates):
    a, b, cov, lat = two_covariates
    d = build_design("~ a + b + a:b", cov, lat)
    assert isinstance(d, DesignMatrix)
    assert d.names == ("a", "b", "a:b")
    assert d.X.shape == (3, 4, 3) and d.X.dtype == np.float64
    raw = [a, b, a * b]  # interaction of the unscaled covariates
    for k, r in enumerate(raw):
        assert d.center[k] == pytest.approx(r.mean(), abs=1e-12)
        assert d.scale[k] == pytest.approx(r.std(), abs=1e-12)  # population SD (ddof=0)
        np.testing.assert_allclose(d.X[..., k], (r - r.mean()) / r.std(), atol=1e-12)
    assert d.methods == {"a": "area", "b": "area"}
    np.testing.assert_array_equal(d.columns, np.moveaxis(d.X, -1, 0))
    with pytest.raises(ValueError, match="read-only"):
        d.X[0, 0, 0] = 1.0
    nc = build_design("~ a", cov, lat, center=False, scale=False)
    np.testing.assert_allclose(nc.X[..., 0], a, atol=1e-12)
    assert (nc.center[0], nc.scale[0]) == (0.0, 1.0)


def test_build_design_weights_and_mask():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    w = np.array([[1.0, 1.0], [0.0, 2.0]])
    d = build_design("~ a", {"a": grid(a)}, Lattice((2, 2)), weights=w)
    # inside = w > 0 → cells 1, 2, 4; mean = (1 + 2 + 2·4) / 4 = 2.75,
    # var = (1.75² + 0.75² + 2·1.25²) / 4 = 6.75 / 4
    assert d.center[0] == pytest.approx(2.75, abs=1e-12)
    assert d.scale[0] == pytest.approx(math.sqrt(6.75 / 4), abs=1e-12)
    assert np.isnan(d.X[1, 0, 0]) and not d.inside[1, 0]
    assert np.isfinite(d.X[d.inside]).all()
    # an explicit mask with equal weights: mean of 1, 2, 4
    m = build_design("~ a", {"a": grid(a)}, Lattice((2, 2)), inside=w > 0)
    assert m.center[0] == pytest.approx(7 / 3, abs=1e-12)


def test_build_design_categorical_dummies_and_interaction():
    soil = np.array([[1, 2, 2], [3, 1, 3]])
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]])
    cov = {"soil": grid(soil, flag_values=[1, 2, 3], flag_meanings="clay loam sand"),
           "a": grid(a)}
    d = build_design("~ C(soil) + a:C(soil)", cov, Lattice((2, 3)))
    assert d.names == ("C(soil)[T.loam]", "C(soil)[T.sand]",
                       "a:C(soil)[T.loam]", "a:C(soil)[T.sand]")
    np.testing.assert_array_equal(d.X[..., 0], soil == 2)
    np.testing.assert_array_equal(d.X[..., 1], soil == 3)
    np.testing.assert_array_equal(d.center[:2], [0.0, 0.0])
    np.testing.assert_array_equal(d.scale[:2], [1.0, 1.0])
    # a:C(soil)[T.sand] = a · [soil == 3] = [0, 0, 0, 4, 0, 7] → centred and scaled
    r = a * (soil == 3)
    assert d.center[3] == pytest.approx(11 / 6, abs=1e-12)
    np.testing.assert_allclose(d.X[..., 3], (r - r.mean()) / r.std(), atol=1e-12)
    assert d.levels == {"C(soil)": ("clay", "loam", "sand")}
    assert d.methods == {"C(soil)": "majority", "a": "area"}
    assert d.column_factors[3] == ("a", "C(soil)")
    assert d.as_dataset()["a:C(soil)[T.sand]"].attrs["regrid_method"] == "area,majority"
    # without flag attrs the levels are named by their codes
    plain = build_design("~ C(soil)", {"soil": grid(soil)}, Lattice((2, 3)))
    assert plain.names == ("C(soil)[T.2]", "C(soil)[T.3]")


def test_build_design_categorical_regridded_by_majority():
    soil = np.array([[1, 1, 2, 2], [1, 3, 2, 2]])
    d = build_design("~ C(soil)", {"soil": grid(soil)}, Lattice((1, 2), spacing=2.0))
    # left block: 1 covers 3 of 4 → 1 (reference); right block: all 2 → [T.2] = [0, 1]
    assert d.names == ("C(soil)[T.2]",)
    np.testing.assert_array_equal(d.X[..., 0], [[0.0, 1.0]])
    # nearest: centres (1, 1) and (1, 3) sit on source edges → upper cells soil[1, 1] = 3 and
    # soil[1, 3] = 2 → levels {2, 3}, [T.3] = [1, 0]
    dn = build_design("~ C(soil)", {"soil": grid(soil)}, Lattice((1, 2), spacing=2.0),
                      methods={"soil": "nearest"})
    assert dn.methods == {"C(soil)": "nearest"}
    assert dn.names == ("C(soil)[T.3]",)
    np.testing.assert_array_equal(dn.X[..., 0], [[1.0, 0.0]])


def test_to_original_gives_the_same_linear_predictor(two_covariates):
    a, b, cov, lat = two_covariates
    d = build_design("~ a + b + a:b", cov, lat)
    beta = np.array([0.3, -1.2, 0.05])
    alpha = 0.7
    eta_std = alpha + d.X @ beta
    beta_o, alpha_o = d.to_original(beta, alpha)
    raw = np.stack([a, b, a * b], axis=-1)  # original-scale columns built independently
    np.testing.assert_allclose(alpha_o + raw @ beta_o, eta_std, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(beta_o, beta / np.array([a.std(), b.std(), (a * b).std()]),
                               rtol=1e-12)
    assert isinstance(alpha_o, float)
    # draws with a leading sample axis
    rng = np.random.default_rng(1)
    draws, alphas = rng.normal(size=(5, 3)), rng.normal(size=5)
    bo, ao = d.to_original(draws, alphas)
    assert bo.shape == (5, 3) and ao.shape == (5,)
    for s in range(5):
        b1, a1 = d.to_original(draws[s], alphas[s])
        np.testing.assert_allclose(bo[s], b1, rtol=1e-14)
        assert ao[s] == pytest.approx(a1, rel=1e-14)
    with pytest.raises(ShapeMismatchError, match=r"\(\.\.\., 3\)"):
        d.to_original(np.ones(2))
    with pytest.raises(ShapeMismatchError, match="intercept"):
        d.to_original(draws, np.ones(4))


def test_to_original_leaves_dummy_coefficients_alone():
    soil = np.array([[1, 2], [2, 1]])
    d = build_design("~ C(soil)", {"soil": grid(soil)}, Lattice((2, 2)))
    bo, ao = d.to_original(np.array([0.4]), 1.0)
    assert bo[0] == 0.4 and ao == 1.0


def test_as_dataset_and_describe(two_covariates):
    _, _, cov, lat = two_covariates
    d = build_design("~ a + a:b", cov, lat)
    ds = d.as_dataset()
    assert list(ds.data_vars) == ["a", "a:b"]
    np.testing.assert_array_equal(ds["a:b"].values, d.X[..., 1])
    assert ds["a"].dims == ("y", "x")
    assert ds["a"].attrs["center"] == d.center[0]
    assert ds["a:b"].attrs["regrid_method"] == "area"
    assert ds.attrs["formula"] == "~ a + a:b"
    text = d.describe()
    assert "a:b" in text and "12 of 12 cells inside" in text


def test_empty_formula_gives_no_columns():
    d = build_design("~ 1", {}, Lattice((2, 3)))
    assert d.X.shape == (2, 3, 0) and d.names == ()
    bo, ao = d.to_original(np.zeros(0), 2.5)
    assert bo.shape == (0,) and ao == 2.5


def test_build_design_from_paths(tmp_path):
    df = pd.DataFrame({"x": [0.5, 1.5, 0.5, 1.5], "y": [0.5, 0.5, 1.5, 1.5],
                       "a": [1.0, 2.0, 3.0, 5.0]})
    df.to_csv(tmp_path / "t.csv", index=False)
    d = build_design("~ a", {"a": str(tmp_path / "t.csv")}, Lattice((2, 2)),
                     center=False, scale=False)
    np.testing.assert_array_equal(d.X[..., 0], [[1, 2], [3, 5]])
    with pytest.raises(InvalidParameterError, match=r"suffix '\.txt'"):
        build_design("~ a", {"a": tmp_path / "t.txt"}, Lattice((2, 2)))
    with pytest.raises(InvalidParameterError, match="list"):
        build_design("~ a", {"a": [1, 2]}, Lattice((2, 2)))


@pytest.mark.skipif(not BEI.exists(), reason="bei data not present")
def test_build_design_on_bei():
    lat = Lattice((100, 200), spacing=5.0, units="m")
    d = build_design("~ elev + grad", {"elev": BEI, "grad": BEI}, lat)
    assert d.names == ("elev", "grad")
    # centring is over the regridded cells; the README's ranges bound the centres
    assert 119.81 < d.center[0] < 159.48 and 0.00087 < d.center[1] < 0.3285
    assert np.isfinite(d.X).all()


def test_build_design_refusals(two_covariates):
    _, _, cov, lat = two_covariates
    with pytest.raises(InvalidParameterError, match=r"lacks \['c'\]"):
        build_design("~ a + c", cov, lat)
    with pytest.raises(InvalidParameterError, match=r"methods names \['z'\]"):
        build_design("~ a", cov, lat, methods={"z": "area"})
    with pytest.raises(InvalidParameterError, match="'cubic' is not one of"):
        build_design("~ a", cov, lat, methods={"a": "cubic"})
    with pytest.raises(InvalidParameterError, match="'area' would average category codes"):
        build_design("~ C(a)", cov, lat, methods={"a": "area"})
    with pytest.raises(InvalidParameterError, match="mapping"):
        build_design("~ a", [cov["a"]], lat)
    with pytest.raises(InvalidParameterError, match="lattice"):
        build_design("~ a", cov, (3, 4))
    with pytest.raises(ShapeMismatchError, match="weights has shape"):
        build_design("~ a", cov, lat, weights=np.ones((4, 3)))
    w = np.ones((3, 4))
    w[1, 2] = -1.0
    with pytest.raises(InvalidParameterError, match=r"-1\.0 at index \(1, 2\)"):
        build_design("~ a", cov, lat, weights=w)
    with pytest.raises(InvalidDataError, match="positive weight"):
        build_design("~ a", cov, lat, weights=np.zeros((3, 4)))
    with pytest.raises(ShapeMismatchError, match="inside has shape"):
        build_design("~ a", cov, lat, inside=np.ones((2, 2), dtype=bool))
    # a covariate the lattice extends beyond: the error names the covariate
    with pytest.raises(InvalidDataError, match=r"covariates\['a'\].*not fully covered"):
        build_design("~ a", cov, Lattice((3, 5)))


def test_build_design_refuses_constant_columns():
    lat = Lattice((2, 2))
    const = {"c": grid(np.full((2, 2), 3.0)), "v": grid([[1.0, 2.0], [3.0, 4.0]])}
    with pytest.raises(InvalidDataError, match="column 'c' is constant"):
        build_design("~ v + c", const, lat)
    # constant only over the mask: v is 1 on the masked-in cells
    masked = {"v": grid([[1.0, 1.0], [1.0, 9.0]])}
    with pytest.raises(InvalidDataError, match="column 'v' is constant"):
        build_design("~ v", masked, lat, inside=np.array([[True, True], [True, False]]))
    # a categorical with one level inside the mask
    with pytest.raises(InvalidDataError, match=r"C\(s\) has 1 level"):
        build_design("~ C(s)", {"s": grid([[2, 2], [2, 5]])}, lat,
                     inside=np.array([[True, True], [True, False]]))


def test_every_error_is_a_lattice_lgm_error():
    with pytest.raises(LatticeLGMError):
        parse_formula("~ a * b")
    with pytest.raises(LatticeLGMError):
        regrid(grid(np.ones((2, 2))), Lattice((3, 3)))


def test_one_row_raster_uses_the_recorded_spacing(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    from affine import Affine

    path = tmp_path / "row.tif"
    with rasterio.open(path, "w", driver="GTiff", height=1, width=4, count=1, dtype="float64",
                       transform=Affine(1.0, 0.0, 0.0, 0.0, -2.0, 2.0)) as dst:
        dst.write(np.array([[1.0, 3.0, 5.0, 7.0]]), 1)
    da = read_raster(path)
    assert da["y"].attrs["spacing"] == 2.0 and da["x"].attrs["spacing"] == 1.0
    # one row covering y in [0, 2]; target cells of 2 × 2 average pairs of columns
    out = regrid(da, Lattice((1, 2), spacing=2.0))
    np.testing.assert_allclose(out.values, [[2.0, 6.0]], rtol=0, atol=1e-12)
