// Run plugin code natively under Node (>= 20.6): `node --import
// <sdk>/testing/register.js --test`. It resolves the host's imports
// (`weft:plugin/log@0.1.0`, clock, state) to the stand-ins in host.js, the
// way the Rust and Python SDKs do natively.
import { register } from 'node:module';

register('./hooks.js', import.meta.url);
