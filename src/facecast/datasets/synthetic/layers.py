"""The layers of a synthetic face, painted back to front onto one canvas.

:func:`face_frame` fixes what every layer shares (the canvas with its background, the
light, the colours, where the eyes, nose and mouth sit after the head's yaw); each
``paint_*`` function then paints one layer into the frame's canvas. The renderer
(:mod:`facecast.datasets.synthetic.render`) calls them in the order of this module; that
order is the compositing order and must not change (nor may a layer's arithmetic, nor the
seeded streams of freckles and beard: every demo image depends on them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import gaussian_filter

from facecast.datasets.synthetic.draw import (
    Canvas,
    Region,
    background,
    dome_shade,
    ellipse_dist,
    foreshorten,
    gauss,
    normals,
    segment_dist,
    shade_normals,
    skin_texture,
    yaw_u,
)
from facecast.datasets.synthetic.sampling import IdentityTraits, ImageCovariates, mix

__all__ = [
    "FaceFrame",
    "face_frame",
    "paint_body",
    "paint_brows",
    "paint_eyes",
    "paint_facial_hair",
    "paint_glasses",
    "paint_hair",
    "paint_hat",
    "paint_marks",
    "paint_mouth",
    "paint_nose",
    "paint_skin",
    "paint_wrinkles",
]


@dataclass(frozen=True, eq=False)
class FaceFrame:
    """One photo of one person, ready to paint: the canvas (background painted) and the
    geometry and colours the layers share (face units; ``yaw`` in radians)."""

    cv: Canvas
    traits: IdentityTraits
    cov: ImageCovariates
    yaw: float
    light: np.ndarray  # unit light direction in the face frame (roll applied)
    h: float  # face aspect: the face's half-height
    hv: float  # hair volume
    skin: np.ndarray
    hair_col: np.ndarray
    brow_col: np.ndarray
    es: float  # eye spacing
    ev: float  # eye height
    nw: float  # nose width
    mv: float  # mouth height
    eyes_u: list[float]  # image-plane u of the left and right eye
    nose_tip: float
    nv_tip: float  # v of the nose tip
    mouth_u: float
    eye_w: float  # eye half-width before foreshortening

    def face_region(self, cu: float, cv_: float, hu: float, hvv: float) -> Region:
        """The canvas window of the face-unit box centred at (cu, cv_), half-sizes hu, hvv."""
        return self.cv.region(cu - hu, cu + hu, cv_ - hvv, cv_ + hvv)


def face_frame(traits: IdentityTraits, cov: ImageCovariates, size: int) -> FaceFrame:
    """The frame of one render: a ``size`` px canvas with the photo's background
    (``cov.background_seed``), scale, shift and roll; light, colours and feature positions."""
    S = int(size)
    ppu = 0.22 * S * cov.scale  # pixels per face unit (face half-width)
    roll = math.radians(cov.roll)
    yaw = math.radians(cov.yaw)
    cv = Canvas(background(S, cov.background_seed), S * (0.5 + cov.shift_x),
                S * (0.46 + cov.shift_y), ppu, roll)
    h = traits.face_aspect
    hv = traits.hair_volume
    skin = np.asarray(traits.skin_rgb, np.float32)
    hair_col = mix(np.asarray(traits.hair_rgb, np.float32),
                   np.array([0.74, 0.74, 0.72], np.float32), traits.hair_grey)
    brow_col = mix(np.asarray(traits.hair_rgb, np.float32) * 0.8,
                   np.array([0.55, 0.55, 0.53], np.float32), 0.6 * traits.hair_grey)
    az = math.radians(cov.light_direction)
    light_img = np.array([math.sin(az), -0.35, math.cos(az)], np.float32)
    light_img /= np.linalg.norm(light_img)
    cr, sr = math.cos(roll), math.sin(roll)
    light = np.array([light_img[0] * cr + light_img[1] * sr,
                      -light_img[0] * sr + light_img[1] * cr, light_img[2]], np.float32)
    es, ev = traits.eye_spacing, traits.eye_height
    nw, mv = traits.nose_width, traits.mouth_height
    eyes_u = [yaw_u(s * es, 0.85, yaw) for s in (-1.0, 1.0)]
    nose_tip = yaw_u(0.0, 1.25, yaw)
    nv_tip = ev + traits.nose_length + 0.05
    mouth_u = yaw_u(0.0, 0.95, yaw)
    eye_w = 0.19 * traits.eye_size
    return FaceFrame(cv=cv, traits=traits, cov=cov, yaw=yaw, light=light, h=h, hv=hv,
                     skin=skin, hair_col=hair_col, brow_col=brow_col, es=es, ev=ev, nw=nw,
                     mv=mv, eyes_u=eyes_u, nose_tip=nose_tip, nv_tip=nv_tip,
                     mouth_u=mouth_u, eye_w=eye_w)


def paint_body(f: FaceFrame) -> None:
    """Shoulders, long hair behind the head (long-haired people only), the neck and
    the ears: everything the face covers, painted first."""
    cv, traits, cov, light = f.cv, f.traits, f.cov, f.light
    h, hv, yaw, skin, hair_col = f.h, f.hv, f.yaw, f.skin, f.hair_col
    sh_top = h + 0.2
    r = cv.region(-2.4, 2.4, sh_top - 0.05, sh_top + 2.5)
    if not r.empty:
        d_sh = ellipse_dist(r.u, r.v, 0.0, sh_top + 1.1, 2.2, 1.1)
        sh = dome_shade(r.u, r.v, 0.0, sh_top + 1.1, 2.3, 1.3, light, 0.45, 0.0)
        r.paint(r.soft(d_sh), np.asarray(cov.clothing_rgb, np.float32) * sh[..., None])
    if traits.hair_long:
        r = cv.region(-1.45 * hv, 1.45 * hv, -h - 0.3, h + 0.8)
        d_back = np.maximum(ellipse_dist(r.u, r.v, 0.0, 0.1, 1.2 * hv, h + 0.2),
                            r.v - (h + 0.55))
        back = 0.5 + 0.25 * np.clip(1 - (r.u / 1.3) ** 2, 0, 1)
        strands = 0.9 + 0.1 * np.sin(50.0 * r.u)
        r.paint(r.soft(d_back), hair_col * (back * strands)[..., None])
    neck_w = 0.55 + 0.08 * traits.male
    r = cv.region(-neck_w - 0.1, neck_w + 0.1, 0.2 * h, h + 0.9)
    d_neck = np.maximum(np.abs(r.u) - neck_w, np.maximum(0.3 * h - r.v, r.v - (h + 0.8)))
    x = np.clip(r.u / (neck_w + 0.05), -0.99, 0.99)
    neck = shade_normals(x, 0 * x, np.sqrt(1 - x * x), light, spec=0.0)
    neck *= 1.0 - 0.4 * np.exp(-np.clip(r.v - h * 0.9, 0, None) / 0.2)  # jaw shadow
    r.paint(r.soft(d_neck), skin * neck[..., None])
    for s in (-1.0, 1.0):
        eu = yaw_u(s * 0.97, 0.1, yaw)
        r = cv.region(eu - 0.2, eu + 0.2, -0.3, 0.35)
        d_ear = ellipse_dist(r.u, r.v, eu, 0.02, 0.14, 0.25)
        ear = 0.6 + 0.3 * gauss(r.u, r.v, eu, 0.0, 0.1, 0.18)
        r.paint(r.soft(d_ear), skin * ear[..., None])


def paint_skin(f: FaceFrame) -> None:
    """The face itself: a depth map (ellipsoid plus nose, sockets, cheekbones, brow,
    chin bumps) under Lambertian shading, in the skin colour with blush and the identity's
    skin texture. Fills the canvas's face coverage and shading, which every later feature
    clips to."""
    cv, traits, light, h, yaw, skin = f.cv, f.traits, f.light, f.h, f.yaw, f.skin
    ev, nw, mv, eyes_u = f.ev, f.nw, f.mv, f.eyes_u
    nose_tip, nv_tip, mouth_u = f.nose_tip, f.nv_tip, f.mouth_u
    nose_root = yaw_u(0.0, 1.0, yaw)
    head = cv.region(-1.05, 1.05, -h - 0.05, h + 0.05)
    u, v = head.u, head.v
    w_v = 1.0 - traits.jaw_taper * np.clip(v / h, 0.0, 1.0) ** 2
    q = (u / w_v) ** 2 + (v / h) ** 2
    d_face = (np.sqrt(q) - 1.0) * w_v
    face_a = head.soft(d_face)
    z = np.sqrt(np.clip(1.0 - q, 0.0, 1.0)) * 0.9
    t = np.clip((v - ev) / max(nv_tip - ev, 1e-3), 0.0, 1.0)
    ridge_u = nose_root + (nose_tip - nose_root) * t
    ridge_w = 0.07 + 0.11 * t * nw / 0.23
    ridge = (0.08 + 0.2 * t) * np.exp(-0.5 * ((u - ridge_u) / ridge_w) ** 2)
    ridge *= (v > ev - 0.05) * np.exp(-np.clip(v - nv_tip, 0, None) ** 2 / 0.003)
    z += ridge.astype(np.float32)
    z += 0.07 * gauss(u, v, nose_tip, nv_tip, 0.08 * nw / 0.23 + 0.03, 0.06)
    for eu in eyes_u:
        z -= 0.08 * gauss(u, v, eu, ev + 0.01, 0.18, 0.12)  # eye sockets
        z += 0.04 * gauss(u, v, eu * 1.1, ev + 0.32, 0.2, 0.12)  # cheekbones
    z += 0.05 * gauss(u, v, 0.5 * (eyes_u[0] + eyes_u[1]), traits.brow_height - 0.02, 0.55, 0.07)
    z += 0.035 * gauss(u, v, mouth_u, mv + 0.02, traits.mouth_width * 0.8, 0.07)
    z += 0.04 * gauss(u, v, yaw_u(0.0, 0.8, yaw), h * 0.82, 0.25, 0.12)
    shade = shade_normals(*normals(z, cv.px), light)
    shade *= 1.0 - 0.3 * gauss(u, v, nose_tip, nv_tip + 0.07, 0.1 + 0.2 * nw, 0.03)
    shade *= 1.0 - 0.18 * gauss(u, v, mouth_u, mv + 0.15, traits.mouth_width * 0.6, 0.035)
    blush = np.zeros_like(u)
    for s in (-1.0, 1.0):
        blush += 0.08 * gauss(u, v, yaw_u(s * 0.5, 0.8, yaw), 0.3, 0.18, 0.14)
    col = mix(skin, np.array([0.78, 0.32, 0.32], np.float32), blush[..., None])
    u0 = (u - np.sqrt(np.clip(1.0 - q, 0.0, 1.0)) * 0.9 * math.sin(yaw)) / math.cos(yaw)
    col = col * (1.0 + traits.texture_strength * skin_texture(u0, v, traits.texture_seed)
                 )[..., None]
    head.paint(face_a, col * shade[..., None])
    cv.face[head.sl] = face_a
    cv.shade[head.sl] = shade


def paint_marks(f: FaceFrame) -> None:
    """Freckles (their own seeded stream, ``traits.freckle_seed``) and moles: identity
    cues on the skin."""
    cv, traits, yaw, skin, face_region = f.cv, f.traits, f.yaw, f.skin, f.face_region
    if traits.freckles > 0:
        frng = np.random.default_rng(traits.freckle_seed)
        r = cv.region(-0.75, 0.75, -0.05, 0.55)
        dots = np.full(r.u.shape, 9.0, np.float32)
        for _ in range(40):
            fu0, fv0 = frng.uniform(-0.6, 0.6), frng.uniform(0.0, 0.45)
            dots = np.minimum(dots, np.hypot(r.u - yaw_u(fu0, 0.85, yaw), r.v - fv0))
        r.paint(traits.freckles * 0.5 * r.soft(dots - 0.012) * r.face, skin * 0.6)
    for mu0, mv0, mr in traits.moles:
        mu = yaw_u(mu0, 0.85, yaw)
        fs = foreshorten(mu0, yaw)
        r = face_region(mu, mv0, mr + 0.05, mr + 0.05)
        r.paint(0.85 * r.soft(ellipse_dist(r.u, r.v, mu, mv0, mr * fs, mr)) * r.face,
                np.array([0.22, 0.13, 0.09], np.float32))


def paint_wrinkles(f: FaceFrame) -> None:
    """Age wrinkles (people with ``wrinkles > 0.05``): forehead lines, nasolabial folds
    and crow's feet."""
    cv, traits, yaw, skin = f.cv, f.traits, f.yaw, f.skin
    es, ev, nw, mv, nv_tip = f.es, f.ev, f.nw, f.mv, f.nv_tip
    wr = traits.wrinkles
    if wr > 0.05:
        strength = (0.12 + 0.3 * wr) * wr**0.5
        fore = yaw_u(0.0, 0.9, yaw)
        r = cv.region(fore - 0.6, fore + 0.6, -0.8, -0.45)
        lines = np.zeros_like(r.u)
        for i, lv in enumerate((-0.52, -0.62, -0.72)):
            wave = lv + 0.015 * np.sin(6.0 * r.u + i)
            lines += np.exp(-0.5 * ((r.v - wave) / 0.011) ** 2)
        lines *= np.abs(r.u - fore) < 0.55
        r.paint(np.clip(lines, 0, 1) * strength * r.face, skin * 0.45)
        for s in (-1.0, 1.0):
            a = (yaw_u(s * (nw * 0.55 + 0.08), 0.95, yaw), nv_tip - 0.02)
            b = (yaw_u(s * (traits.mouth_width + 0.07), 0.85, yaw), mv + 0.12)
            r = cv.region(min(a[0], b[0]) - 0.05, max(a[0], b[0]) + 0.05, a[1] - 0.05,
                          b[1] + 0.05)
            fold = np.exp(-0.5 * (segment_dist(r.u, r.v, a, b) / 0.014) ** 2)
            r.paint(fold * strength * r.face, skin * 0.45)
            cu = yaw_u(s * (es + 0.2), 0.75, yaw)
            r = cv.region(cu - 0.15, cu + 0.15, ev - 0.12, ev + 0.12)
            feet = np.zeros_like(r.u)
            for ang in (-0.4, 0.0, 0.4):
                end = (cu + s * 0.11 * math.cos(ang), ev + 0.11 * math.sin(ang))
                feet += np.exp(-0.5 * (segment_dist(r.u, r.v, (cu, ev), end) / 0.009) ** 2)
            r.paint(np.clip(feet, 0, 1) * strength * r.face, skin * 0.45)


def paint_facial_hair(f: FaceFrame) -> None:
    """Beard (its own seeded stream, ``traits.freckle_seed + 1``) and moustache."""
    cv, traits, h, hair_col, face_region = f.cv, f.traits, f.h, f.hair_col, f.face_region
    mv, nv_tip, mouth_u = f.mv, f.nv_tip, f.mouth_u
    if traits.beard:
        r = cv.region(-1.05, 1.05, nv_tip, h + 0.05)
        brng = np.random.default_rng(traits.freckle_seed + 1)
        tex = gaussian_filter(brng.standard_normal(r.u.shape).astype(np.float32), 0.7)
        ramp = np.clip((r.v - (nv_tip + 0.12)) / 0.15, 0, 1)
        r.paint(r.face * ramp * traits.beard_density * (0.75 + 0.25 * np.tanh(tex)),
                hair_col * 0.75)
    if traits.moustache:
        r = face_region(mouth_u, mv - 0.1, traits.mouth_width + 0.05, 0.1)
        d_m = ellipse_dist(r.u, r.v, mouth_u, mv - 0.1, traits.mouth_width * 0.95, 0.055)
        r.paint(0.85 * r.soft(d_m) * r.face, hair_col * 0.7)


def paint_mouth(f: FaceFrame) -> None:
    """Upper and lower lip and the mouth line, bent by the photo's smile."""
    traits, cov, yaw, face_region = f.traits, f.cov, f.yaw, f.face_region
    mv, mouth_u = f.mv, f.mouth_u
    mw = traits.mouth_width * foreshorten(0.0, yaw)
    lt = traits.lip_thickness
    r = face_region(mouth_u, mv, mw + 0.05, 0.2)
    xm = (r.u - mouth_u) / mw
    inside_x = np.clip(1.0 - xm**2, 0.0, 1.0)
    line_v = mv - cov.smile * 0.07 * xm**2 + 0.02 * cov.smile
    upper = np.maximum(line_v - 0.065 * lt * np.sqrt(inside_x)
                       + 0.015 * np.exp(-((xm / 0.12) ** 2)) - r.v, r.v - line_v)
    lower = np.maximum(line_v - r.v, r.v - (line_v + 0.085 * lt * inside_x**0.6))
    lip = np.asarray(traits.lip_rgb, np.float32) * r.shade[..., None]
    r.paint(r.soft(np.maximum(upper, np.abs(xm) - 1.0)) * r.face, lip * 0.85)
    r.paint(r.soft(np.maximum(lower, np.abs(xm) - 1.0)) * r.face, lip * 1.05)
    mouth_line = np.exp(-0.5 * ((r.v - line_v) / 0.013) ** 2) * (np.abs(xm) < 1.04)
    r.paint(0.85 * mouth_line * r.face, np.array([0.12, 0.04, 0.04], np.float32))


def paint_nose(f: FaceFrame) -> None:
    """Nostrils and alar creases."""
    yaw, skin, face_region = f.yaw, f.skin, f.face_region
    nw, nose_tip, nv_tip = f.nw, f.nose_tip, f.nv_tip
    for s in (-1.0, 1.0):
        nu = nose_tip + s * nw * 0.38 * foreshorten(s * 0.15, yaw)
        r = face_region(nu, nv_tip, 0.12, 0.1)
        d_n = ellipse_dist(r.u, r.v, nu, nv_tip + 0.025, 0.05 * nw / 0.23, 0.026)
        r.paint(0.8 * r.soft(d_n) * r.face, skin * 0.2)
        wing = ellipse_dist(r.u, r.v, nose_tip + s * nw * 0.52, nv_tip - 0.01, 0.07, 0.07)
        r.paint(0.4 * np.exp(-0.5 * (wing / 0.012) ** 2) * (r.v > nv_tip - 0.07) * r.face,
                skin * 0.45)


def paint_eyes(f: FaceFrame) -> None:
    """Both eyes: socket shadow, lid crease, sclera, iris and pupil (turned by the
    gaze and yaw), highlight, lashes and lower lid."""
    traits, cov, light, yaw, skin = f.traits, f.cov, f.light, f.yaw, f.skin
    es, ev, eyes_u, eye_w, face_region = f.es, f.ev, f.eyes_u, f.eye_w, f.face_region
    eye_h = 0.074 * traits.eye_size
    iris = np.asarray(traits.iris_rgb, np.float32)
    for s, eu in zip((-1.0, 1.0), eyes_u, strict=True):
        fs = foreshorten(s * es, yaw)
        a_e = eye_w * fs
        r = face_region(eu, ev, a_e + 0.08, eye_h + 0.12)
        xe = (r.u - eu) / a_e
        ye = r.v - ev
        span = np.clip(1.0 - xe**2, 0.0, 1.0)
        top = -eye_h * span**0.65 - 0.014 * xe * s  # upper lid; outer corner a bit higher
        bot = eye_h * 0.75 * span**0.9
        d_eye = np.maximum(np.maximum(top - ye, ye - bot), (np.abs(xe) - 1.0) * a_e)
        eye_a = r.soft(d_eye) * r.face
        r.paint(0.25 * gauss(r.u, r.v, eu, ev - 0.02, a_e * 1.2, 0.09) * r.face, skin * 0.35)
        crease = np.exp(-0.5 * ((ye - (top - 0.04)) / 0.011) ** 2) * (np.abs(xe) < 0.9)
        r.paint(0.3 * crease * r.face, skin * 0.4)
        r.paint(eye_a, np.array([0.93, 0.91, 0.88], np.float32) * (0.6 + 0.4 * r.shade[..., None]))
        iu = eu + (cov.gaze + 0.3 * math.sin(yaw)) * a_e * 0.45
        rad = np.sqrt(((r.u - iu) / fs) ** 2 + ye**2)
        r_i = eye_h * 1.15
        ring = np.clip(1.0 - rad / r_i, 0, 1)[..., None]
        r.paint(r.soft((rad - r_i) * fs) * eye_a, iris * (0.5 + 0.7 * ring))
        r.paint(r.soft((rad - r_i * 0.42) * fs) * eye_a, np.array([0.03, 0.03, 0.03]))
        hl = ellipse_dist(r.u, r.v, iu + 0.35 * r_i * light[0], ev - 0.35 * r_i,
                          0.22 * r_i, 0.22 * r_i)
        r.paint(0.9 * r.soft(hl) * eye_a, np.array([1.0, 1.0, 1.0], np.float32))
        lash_t = 0.016 + 0.01 * (1.0 - traits.male)
        lash = r.soft(np.abs(ye - top + lash_t * 0.4) - lash_t / 2) * (np.abs(xe) < 1.08)
        r.paint(lash * r.face, np.array([0.05, 0.04, 0.04], np.float32))
        lower_lid = np.exp(-0.5 * ((ye - bot - 0.006) / 0.008) ** 2) * (np.abs(xe) < 0.95)
        r.paint(0.35 * lower_lid * r.face, skin * 0.45)


def paint_brows(f: FaceFrame) -> None:
    """Both eyebrows in the brow colour (hair colour, greying with age)."""
    traits, yaw, brow_col, face_region = f.traits, f.yaw, f.brow_col, f.face_region
    es, eyes_u = f.es, f.eyes_u
    bl = traits.brow_length
    for s, eu in zip((-1.0, 1.0), eyes_u, strict=True):
        fs = foreshorten(s * es, yaw)
        bu = eu + s * 0.02
        r = face_region(bu, traits.brow_height, bl * fs + 0.05, 0.15)
        xb = (r.u - bu) / (bl * fs)
        cb = traits.brow_height - traits.brow_arch * np.clip(1.0 - (xb + 0.3 * s) ** 2, 0, 1)
        thick = traits.brow_thickness * (1.0 - 0.45 * np.clip((xb * s + 1.0) / 2.0, 0, 1))
        d_br = np.maximum(np.abs(r.v - cb) - thick / 2, (np.abs(xb) - 1.0) * bl * fs)
        r.paint(0.92 * r.soft(d_br) * r.face, brow_col)


def paint_hair(f: FaceFrame) -> None:
    """Hair on top of the head, or for bald people the hair left at the sides."""
    cv, traits, light, h, hv, hair_col = f.cv, f.traits, f.light, f.h, f.hv, f.hair_col
    r = cv.region(-1.3 * hv, 1.3 * hv, -h - 0.3, 0.5 + 0.3 * traits.hair_long)
    if not traits.bald:
        part = traits.hair_part
        hl = traits.hairline + 0.2 * traits.fringe
        hair_line = hl + 0.42 * r.u**2 + 0.05 * np.abs(r.u - part * 0.5)
        d_cap = ellipse_dist(r.u, r.v, 0.0, -0.05, 1.08 * hv, h + 0.1 * hv)
        w_r = 1.0 - traits.jaw_taper * np.clip(r.v / h, 0.0, 1.0) ** 2
        d_face_r = (np.sqrt((r.u / w_r) ** 2 + (r.v / h) ** 2) - 1.0) * w_r
        side = np.maximum(-d_face_r, r.v - (0.05 + 0.3 * traits.hair_long))
        d_hair = np.maximum(d_cap, np.minimum(r.v - hair_line, side))
        strands = 0.85 + 0.15 * np.sin(55.0 * (r.u - part) + 6.0 * r.v)
        hs = dome_shade(r.u, r.v, 0.0, -0.05, 1.1 * hv, h + 0.12, light, 0.45, 0.25)
        r.paint(r.soft(d_hair), hair_col * (strands * hs)[..., None])
    else:
        for s in (-1.0, 1.0):
            d_side = ellipse_dist(r.u, r.v, s * 0.93, -0.25, 0.1, 0.28)
            r.paint(0.7 * r.soft(d_side) * r.face, hair_col * 0.9)


def paint_glasses(f: FaceFrame) -> None:
    """Thin-framed glasses (photos with ``cov.glasses``): tinted lenses, rims, the
    arms the head does not hide and the bridge."""
    cv, cov, yaw, face_region = f.cv, f.cov, f.yaw, f.face_region
    es, ev, eyes_u, eye_w = f.es, f.ev, f.eyes_u, f.eye_w
    if cov.glasses:
        frame = np.asarray(cov.frame_rgb, np.float32)
        ft = 0.022
        inner_edges = []
        for s, eu in zip((-1.0, 1.0), eyes_u, strict=True):
            fs = foreshorten(s * es, yaw)
            ga, gb = (eye_w + 0.06) * fs, 0.145
            r = face_region(eu, ev, ga + 0.05, gb + 0.05)
            gx = (r.u - eu) / ga
            gy = (r.v - ev - 0.015) / gb
            k = (gx**4 + gy**4) ** 0.25
            r.paint(0.12 * r.soft((k - 1.0) * min(ga, gb)), np.array([0.85, 0.9, 0.95]))
            r.paint(r.soft(np.abs(k - 1.0) * min(ga, gb) - ft / 2), frame)
            inner_edges.append(eu - s * ga)
            a = (eu + s * ga, ev - 0.04)
            b = (yaw_u(s * 0.97, 0.1, yaw), ev - 0.02)
            if s * math.sin(yaw) < 0.25:  # the far arm hides behind the head
                r = cv.region(min(a[0], b[0]) - 0.05, max(a[0], b[0]) + 0.05, ev - 0.1, ev + 0.05)
                r.paint(r.soft(segment_dist(r.u, r.v, a, b) - ft / 2.5), frame)
        lo, hi = sorted(inner_edges)
        r = cv.region(lo - 0.03, hi + 0.03, ev - 0.1, ev)
        r.paint(r.soft(segment_dist(r.u, r.v, (lo, ev - 0.045), (hi, ev - 0.045)) - ft / 2.5),
                frame)


def paint_hat(f: FaceFrame) -> None:
    """A knitted beanie (photos with ``cov.hat``), painted last: it covers the hair."""
    cv, traits, cov, light, h, hv = f.cv, f.traits, f.cov, f.light, f.h, f.hv
    if cov.hat:
        hat = np.asarray(cov.hat_rgb, np.float32)
        r = cv.region(-1.35, 1.35, -h - 0.4, 0.0)
        hat_line = traits.hairline + 0.05 + 0.25 * r.u**2
        d_hat = np.maximum(ellipse_dist(r.u, r.v, 0.0, -0.1, 1.16 * max(hv, 1.05), h + 0.22),
                           r.v - hat_line)
        knit = 0.85 + 0.15 * np.sin(60.0 * r.u) * np.sin(8.0 * r.v)
        hs = dome_shade(r.u, r.v, 0.0, -0.1, 1.2, h + 0.25, light, 0.45, 0.05)
        band = 1.0 - 0.15 * (r.v > hat_line - 0.16)
        r.paint(r.soft(d_hat), hat * (knit * hs * band)[..., None])
