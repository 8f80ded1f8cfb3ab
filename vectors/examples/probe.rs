use graphrag_vectors::*;
use std::collections::HashSet;
struct Rng(u64);
impl Rng {
    fn next_u64(&mut self) -> u64 { self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15); let mut z = self.0; z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9); z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB); z ^ (z >> 31) }
    fn unit(&mut self) -> f64 { ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64 }
    fn gauss(&mut self) -> f32 { let (u, v) = (self.unit(), self.unit()); ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32 }
}
fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let (n, dim, m, efc) = (args[0], args[1], args[2], args[3]);
    let mut rng = Rng(6);
    let ids = (0..n).map(|i| i.to_string()).collect();
    let vecs = (0..n).map(|_| (0..dim).map(|_| rng.gauss()).collect()).collect();
    let mut c = Collection::new(ids, vecs).unwrap();
    let t = std::time::Instant::now();
    c.build_ann(&HnswParams { m, ef_construction: efc, ..Default::default() });
    println!("build {:?}", t.elapsed());
    let qs: Vec<Vec<f32>> = (0..200).map(|_| (0..dim).map(|_| rng.gauss()).collect()).collect();
    let exact: Vec<HashSet<usize>> = qs.iter().map(|q| c.exact_search(q, 10, None).unwrap().iter().map(|h| h.index).collect()).collect();
    for ef in [16, 64, 128, 256, 512, 1024, 2048] {
        let t = std::time::Instant::now();
        let mut r = 0;
        for (q, e) in qs.iter().zip(&exact) { r += c.ann_search(q, 10, ef, None).unwrap().iter().filter(|h| e.contains(&h.index)).count(); }
        println!("ef {ef}: recall {:.4} {:?}/q", r as f64 / 2000.0, t.elapsed() / 200);
    }
}
