/*
 * ARX's SafePub (EDDifferentialPrivacy with a data-dependent search), for
 * tests/solver/test_safepub_search.py (recorded scores) and benchmarks/bench_safepub.py (utility).
 * Compiled against the ARX build of ../shared/arx-side-by-side ($ARXSIDE_WORK/classpath.txt):
 *   javac -cp "$(cat $ARXSIDE_WORK/classpath.txt)" -d $OUT benchmarks/arx_dp/ArxDp.java
 *
 * Arguments are key=value:
 *   data=PATH hier=PATTERN (with {col}) qis=a,b,c metric=loss|precision|entropy|aecs|discernibility
 *   epsilon=2 delta=1e-5 budget=1 steps=10 (expansions, as ARX's TestAnonymizationDifferentialPrivacy);
 *   metric, budget and steps take comma lists (every combination runs in one JVM); with
 *   epsilon_anon=E the epsilon of a run is E + its budget (so k, beta and the sample stay the same)
 *   deterministic=1 (ARX's fixed Random(0xDEADBEEF) for the sample and the mechanism; tests only)
 *   repeat=1 out=PREFIX (each run's output written to PREFIX<run>.csv, ';'-separated)
 * Prints per run one line "RUN {json}": k, beta, sampled rows, the optimum's levels (qis order)
 * and score (ARX's ILScore, the best pivot's, as a double), ms; with nodes=1 also the first 20
 * sampled row indices. (ARX's result lattice of this search holds the optimum alone, so one run
 * yields one node's score: record_scores.sh varies the budget and the steps for more nodes.)
 */
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXConfiguration.SearchStepSemantics;
import org.deidentifier.arx.ARXLattice.ARXNode;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.criteria.EDDifferentialPrivacy;
import org.deidentifier.arx.metric.Metric;
import org.deidentifier.arx.metric.v2.ILScore;

public class ArxDp {

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (String a : args) {
            int i = a.indexOf('=');
            o.put(a.substring(0, i), a.substring(i + 1));
        }
        List<String> qis = Arrays.asList(o.get("qis").split(","));
        String[] metrics = o.getOrDefault("metric", "loss").split(",");
        String epsilonAnon = o.getOrDefault("epsilon_anon", "");
        double delta = Double.parseDouble(o.getOrDefault("delta", "1e-5"));
        String[] budgets = o.getOrDefault("budget", "1").split(",");
        String[] stepList = o.getOrDefault("steps", "10").split(",");
        boolean deterministic = o.getOrDefault("deterministic", "0").equals("1");
        boolean nodes = o.getOrDefault("nodes", "0").equals("1");
        int repeat = Integer.parseInt(o.getOrDefault("repeat", "1"));
        String out = o.getOrDefault("out", "");

        Data data = Data.create(o.get("data"), StandardCharsets.UTF_8, ';');
        DataHandle in = data.getHandle();
        for (int c = 0; c < in.getNumColumns(); c++) {
            String name = in.getAttributeName(c);
            if (qis.contains(name)) {
                data.getDefinition().setAttributeType(name, AttributeType.QUASI_IDENTIFYING_ATTRIBUTE);
                data.getDefinition().setHierarchy(name, Hierarchy.create(o.get("hier").replace("{col}", name),
                                                                         StandardCharsets.UTF_8, ';'));
            } else {
                data.getDefinition().setAttributeType(name, AttributeType.INSENSITIVE_ATTRIBUTE);
            }
        }
        ARXAnonymizer anonymizer = new ARXAnonymizer();
        int r = -1;
        for (String metric : metrics) for (String b : budgets) for (String st : stepList) for (int rep = 0; rep < repeat; rep++) {
            r++;
            double budget = Double.parseDouble(b);
            int steps = Integer.parseInt(st);
            double epsilon = epsilonAnon.isEmpty() ? Double.parseDouble(o.getOrDefault("epsilon", "2"))
                                                   : Double.parseDouble(epsilonAnon) + budget;
            data.getHandle().release();
            ARXConfiguration config = ARXConfiguration.create(1d, metric(metric));
            config.addPrivacyModel(new EDDifferentialPrivacy(epsilon, delta, null, deterministic));
            config.setDPSearchBudget(budget);
            config.setHeuristicSearchStepLimit(steps, SearchStepSemantics.EXPANSIONS);
            long s = System.nanoTime();
            ARXResult result = anonymizer.anonymize(data, config);
            double ms = (System.nanoTime() - s) / 1e6;
            EDDifferentialPrivacy dp = result.getConfiguration().getPrivacyModel(EDDifferentialPrivacy.class);
            StringBuilder j = new StringBuilder("{");
            j.append("\"run\":").append(r).append(",\"metric\":\"").append(metric).append('"');
            j.append(",\"epsilon\":").append(num(epsilon)).append(",\"budget\":").append(num(budget));
            j.append(",\"steps\":").append(steps).append(",\"ms\":").append(num(ms));
            j.append(",\"k\":").append(dp.getK()).append(",\"beta\":").append(num(dp.getBeta()));
            int[] subset = dp.getDataSubset().getArray();
            j.append(",\"sampled\":").append(subset.length);
            ARXNode optimum = result.getGlobalOptimum();
            j.append(",\"optimum\":").append(Arrays.toString(levels(optimum, qis)));
            j.append(",\"score\":").append(num(score(optimum)));
            if (nodes) {
                j.append(",\"first_sampled\":").append(Arrays.toString(Arrays.copyOf(subset, Math.min(20, subset.length))));
            }
            j.append('}');
            if (!out.isEmpty()) {
                result.getOutput().save(new File(out + r + ".csv"), ';');
            }
            System.out.println("RUN " + j);
        }
    }

    static Metric<?> metric(String name) {
        switch (name) {
            case "loss": return Metric.createLossMetric();
            case "precision": return Metric.createPrecisionMetric();
            case "entropy": return Metric.createEntropyMetric();
            case "aecs": return Metric.createAECSMetric();
            case "discernibility": return Metric.createDiscernabilityMetric();
            default: throw new IllegalArgumentException("unknown metric " + name);
        }
    }

    static int[] levels(ARXNode node, List<String> qis) {
        int[] out = new int[qis.size()];
        for (int i = 0; i < qis.size(); i++) out[i] = node.getGeneralization(qis.get(i));
        return out;
    }

    static double score(ARXNode node) {
        return ((ILScore) node.getHighestScore()).getValue().doubleValue();
    }

    static String num(double d) {
        if (Double.isNaN(d) || Double.isInfinite(d)) return "null";
        return String.format(Locale.ROOT, "%.17g", d);
    }
}
