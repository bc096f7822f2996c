// Natively (the test hooks map `weft-plugin-sdk/build` here) the SDK is not
// in a component, so it does not warm the plugin up; bundle.mjs generates
// the component's version of this module.
export const inComponent = false;
export const sampleTask = null;
