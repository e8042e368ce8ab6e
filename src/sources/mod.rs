//! Collectors: each sends owned data to the app and never touches the terminal.
