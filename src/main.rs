fn main() {
    println!("pdtop");
}
